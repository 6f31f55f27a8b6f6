import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { waitFor } from './wait-for';

const ROOT = path.resolve(__dirname, '../..');
let script: string | undefined;

/** session-agent.ts transpiled to JavaScript in a temporary folder, once: `node` runs it. */
function scriptPath(): string {
  if (script) return script;
  const js = ts.transpileModule(readFileSync(path.join(__dirname, 'session-agent.ts'), 'utf8'), {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  script = path.join(mkdtempSync(path.join(tmpdir(), 'session-agent-')), 'session-agent.js');
  writeFileSync(script, js);
  return script;
}

/** A session agent replica in a process of its own (session-agent.ts), on the built SDK. */
export class SessionAgentProcess {
  stdout = '';
  stderr = '';
  readonly child: ChildProcess;

  constructor(url: string, agent: string, token?: string) {
    this.child = spawn(process.execPath, [scriptPath()], {
      env: {
        PATH: process.env.PATH ?? '',
        SESSION_AGENT_URL: url,
        SESSION_AGENT_NAME: agent,
        SESSION_AGENT_TOKEN: token ?? '',
        SESSION_AGENT_SDK: path.join(ROOT, 'dist/packages/client/src'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (d: Buffer) => (this.stdout += d.toString()));
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Resolves once the runtime took its serve. */
  serving(): Promise<void> {
    return waitFor(`agent process ${this.pid} to serve (stderr: ${this.stderr})`, () => /serving /.test(this.stdout), {
      timeoutMs: 20000,
      intervalMs: 50,
    }).then(() => undefined);
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }
}

import { ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { testEnv } from './env';

const ROOT = path.resolve(__dirname, '../..');
export const INSTANCE_MAIN = path.join(ROOT, 'dist/apps/instance/src/main.js');
export const WORKER_MAIN = path.join(ROOT, 'dist/apps/instance/src/worker-main.js');

export interface ExitResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A real runtime instance process (the built `npm start` entry), started with test settings. */
export class InstanceProcess {
  stdout = '';
  stderr = '';
  url?: string;
  private readonly exited: Promise<ExitResult>;

  private constructor(readonly child: ChildProcess) {
    child.stdout!.on('data', (d: Buffer) => (this.stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.keepLogs(code, signal);
        resolve({ code, signal, stdout: this.stdout, stderr: this.stderr });
      }),
    );
  }

  /** With EVENTMESH_TEST_INSTANCE_LOG_DIR set, each instance's output is kept there when it exits, for a failure's post-mortem. */
  private keepLogs(code: number | null, signal: NodeJS.Signals | null): void {
    const dir = process.env.EVENTMESH_TEST_INSTANCE_LOG_DIR;
    if (!dir) return;
    mkdirSync(dir, { recursive: true });
    const name = `${new Date().toISOString().replace(/[:.]/g, '-')}-${this.child.pid}-${code ?? signal}.log`;
    writeFileSync(path.join(dir, name), `${this.stdout}\n--- stderr ---\n${this.stderr}`);
  }

  /** `main`: another built entry point, e.g. the worker's (`dist/apps/instance/src/worker-main.js`). */
  static spawn(overrides: Record<string, string>, main = INSTANCE_MAIN): InstanceProcess {
    const child = spawn(process.execPath, [main], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...testEnv({ EVENTMESH_HTTP_PORT: '0', ...overrides }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new InstanceProcess(child);
  }

  /** Resolves with the gateway URL once the instance listens; rejects if it exits first or the deadline passes. */
  async ready(timeoutMs = 60000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const m = /listening on (http:\/\/\S+)/.exec(this.stdout);
      if (m) return (this.url = m[1]);
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(
          `instance exited (${this.child.exitCode ?? this.child.signalCode}) before it was ready: ${this.stderr}`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`instance not ready within ${timeoutMs} ms; stderr: ${this.stderr.slice(-2000)}`);
  }

  /** Waits for the process to end by itself (a boot that must fail), within a deadline. */
  async exit(timeoutMs = 60000): Promise<ExitResult> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`instance still running after ${timeoutMs} ms; stderr: ${this.stderr}`)),
        timeoutMs,
      );
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGTERM (graceful), SIGKILL if it has not ended after `graceMs`. */
  async stop(graceMs = 20000): Promise<ExitResult> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

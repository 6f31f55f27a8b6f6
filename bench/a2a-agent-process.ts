import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './support';

/** How long the agent's process may take to listen. */
const START_TIMEOUT_MS = 20000;

/**
 * The echo agent in a process of its own (`dist/scripts/echo-agent.js`, what `npm run agent:echo` runs), for the
 * burst of `npm run bench:a2a`: `kill()` is a SIGKILL of that process (the kernel closes its sockets, requests in
 * flight are never answered, its task store is gone), `start()` a new process on the same port. It appends each
 * text it completes a task for to a file, written before it answers, which this process reads: what it completed
 * is counted across its kills.
 */
export class EchoAgentProcess {
  private child?: ChildProcess;
  private port = 0;
  private readonly dir = mkdtempSync(path.join(os.tmpdir(), 'bench-a2a-agent-'));
  private readonly answersFile = path.join(this.dir, 'answers');
  url = '';

  constructor(private readonly name: string) {
    writeFileSync(this.answersFile, '');
  }

  /** Starts the process (on the port it had before, after a kill); resolves with its URL once it listens. */
  async start(): Promise<string> {
    const child = spawn(
      process.execPath,
      [
        path.join(ROOT, 'dist/scripts/echo-agent.js'),
        '--port',
        String(this.port),
        '--name',
        this.name,
        '--answers',
        this.answersFile,
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.child = child;
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    this.url = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(
        () => fail(new Error(`the echo agent's process did not listen within ${START_TIMEOUT_MS} ms: ${stderr}`)),
        START_TIMEOUT_MS,
      );
      const fail = (e: Error) => {
        clearTimeout(timer);
        child.kill('SIGKILL');
        reject(e);
      };
      const exited = (code: number | null, signal: string | null) =>
        fail(new Error(`the echo agent's process exited (${code ?? signal}) before it listened: ${stderr}`));
      child.once('exit', exited);
      const listening = (c: Buffer) => {
        out += c.toString();
        const m = /JSON-RPC at (http:\/\/127\.0\.0\.1:(\d+)\/)/.exec(out);
        if (!m) return;
        clearTimeout(timer);
        child.off('exit', exited);
        child.stdout!.off('data', listening);
        child.stdout!.resume();
        this.port = Number(m[2]);
        resolve(m[1]);
      };
      child.stdout!.on('data', listening);
    });
    return this.url;
  }

  /** SIGKILLs the process; resolves once it exited. */
  async kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  /** The card it serves (its URL in it). */
  async card(): Promise<Record<string, unknown>> {
    const response = await fetch(`${this.url}.well-known/agent-card.json`, { signal: AbortSignal.timeout(5000) });
    return (await response.json()) as Record<string, unknown>;
  }

  /** How many completions it answered for each text, over all its processes. */
  answered(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const text of readFileSync(this.answersFile, 'utf8').split('\n'))
      if (text !== '') counts.set(text, (counts.get(text) ?? 0) + 1);
    return counts;
  }

  async close(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

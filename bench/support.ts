import { ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { loadConfig } from '../libs/config';

export const ROOT = path.resolve(__dirname, '../..');

/** Benchmark settings: the machine's EVENTMESH_* addresses plus the overrides. */
export function benchEnv(overrides: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (k.startsWith('EVENTMESH_') && v !== undefined) env[k] = v;
  return { ...env, EVENTMESH_LOG_LEVEL: 'warn', ...overrides };
}

export const benchConfig = (overrides: Record<string, string> = {}) => loadConfig(benchEnv(overrides));

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export interface RunResult {
  name: string;
  events: number;
  seconds: number;
  perSecond: number;
  latencyMs?: { p50: number; p95: number; p99: number; max: number };
}

export function summarize(name: string, events: number, startedNs: bigint, latenciesMs?: number[]): RunResult {
  const seconds = Number(process.hrtime.bigint() - startedNs) / 1e9;
  const result: RunResult = { name, events, seconds, perSecond: events / seconds };
  if (latenciesMs) {
    const sorted = [...latenciesMs].sort((a, b) => a - b);
    result.latencyMs = {
      p50: percentile(sorted, 50),
      p95: percentile(sorted, 95),
      p99: percentile(sorted, 99),
      max: sorted[sorted.length - 1],
    };
  }
  return result;
}

export function printTable(results: RunResult[]): void {
  const f = (n: number | undefined, d = 1) => (n === undefined ? '-' : n.toFixed(d));
  console.log('| path | events | s | events/s | p50 ms | p95 ms | p99 ms | max ms |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const l = r.latencyMs;
    console.log(`| ${r.name} | ${r.events} | ${f(r.seconds, 2)} | ${f(r.perSecond, 0)} | ${f(l?.p50, 2)} | ${f(l?.p95, 2)} | ${f(l?.p99, 2)} | ${f(l?.max, 2)} |`);
  }
}

/** Starts a built instance process and resolves with its URL once it listens. */
export async function startInstanceProcess(env: Record<string, string>): Promise<{ url: string; child: ChildProcess; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [path.join(ROOT, 'dist/apps/gateway/src/main.js')], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const deadline = Date.now() + 60000;
  for (;;) {
    const m = /listening on (http:\/\/\S+)/.exec(out);
    if (m) {
      return {
        url: m[1],
        child,
        stop: () =>
          new Promise<void>((resolve) => {
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
            setTimeout(() => child.kill('SIGKILL'), 15000).unref();
          }),
      };
    }
    if (child.exitCode !== null) throw new Error(`instance exited: ${err}`);
    if (Date.now() > deadline) throw new Error(`instance not ready in 60 s: ${err}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

import { ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { Kafka } from 'kafkajs';
import { Client as PgClient } from 'pg';
import { loadConfig } from '@libs/config';
import { createTopicsAndWait } from '@libs/kafka';
import { endOwnershipWorkflows } from '@libs/ownership';

export const ROOT = path.resolve(__dirname, '../..');

/** The key benchmark instances seal secrets at rest with (an instance requires one); a fixed, non-production key. */
const BENCH_SECRETS_KEYS = `bench:${Buffer.alloc(32, 'eventmesh bench secrets key').toString('base64')}`;

/** Benchmark settings: the machine's EVENTMESH_* addresses plus the overrides (and a secrets key, unless set); log level warn, or BENCH_LOG_LEVEL. */
export function benchEnv(overrides: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = { EVENTMESH_SECURITY_SECRETS_KEYS: BENCH_SECRETS_KEYS };
  for (const [k, v] of Object.entries(process.env)) if (k.startsWith('EVENTMESH_') && v !== undefined) env[k] = v;
  return { ...env, EVENTMESH_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn', ...overrides };
}

export const benchConfig = (overrides: Record<string, string> = {}) => loadConfig(benchEnv(overrides));

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Milliseconds on the host's monotonic clock (`process.hrtime`): comparable between processes on one host. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Polls `probe` until it answers something other than undefined (a throw counts as undefined), with a deadline. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 120000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await Promise.resolve(probe()).catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Creates the topics with `partitions` partitions each, once their leaders are elected. */
export async function createTopics(kafka: Kafka, topics: string[], partitions: number): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await createTopicsAndWait(
      admin,
      topics.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })),
    );
  } finally {
    await admin.disconnect();
  }
}

/** Ends every ownership workflow (PARTITION_OWNED_PULL) a run before left, so each run starts from no owners. */
export async function resetOwnership(): Promise<void> {
  const config = benchConfig();
  const connection = await Connection.connect({ address: config.temporal.address });
  try {
    await endOwnershipWorkflows(new Client({ connection, namespace: config.temporal.namespace }), 'benchmark reset');
  } finally {
    await connection.close();
  }
}

/** The median of `xs` (the upper one of an even count), which is one of them: a round's figures can be found by it. */
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

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
  /** CPU seconds per process during the run, from `meterCpu`. */
  cpu?: Record<string, number>;
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
    console.log(
      `| ${r.name} | ${r.events} | ${f(r.seconds, 2)} | ${f(r.perSecond, 0)} | ${f(l?.p50, 2)} | ${f(l?.p95, 2)} | ${f(l?.p99, 2)} | ${f(l?.max, 2)} |`,
    );
  }
  const metered = results.filter((r) => r.cpu);
  if (metered.length > 0) {
    console.log('\nCPU per event (from /proc, the host figure is every process on it):');
    for (const r of metered) console.log(`- ${r.name}: ${cpuPerEvent(r.cpu!, r.events)}`);
  }
}

/**
 * Starts a built instance process and resolves with its URL once it listens. Its stdout (log and audit lines) goes
 * to a file, as a deployed instance's goes to its log collector: read through a pipe, it would cost the load
 * generator's event loop, which shares the host with the instance. BENCH_INSTANCE_LOG_DIR keeps the files
 * (default: a temporary directory).
 */
export async function startInstanceProcess(
  env: Record<string, string>,
  /** Another build's checkout to run (an A/B comparison against it); this one by default. */
  root = ROOT,
): Promise<{ url: string; child: ChildProcess; logFile: string; stop(): Promise<void> }> {
  // BENCH_INSTANCE_NODE_ARGS go to the instance's node, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it.
  const nodeArgs = (process.env.BENCH_INSTANCE_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const logDir = process.env.BENCH_INSTANCE_LOG_DIR ?? mkdtempSync(path.join(os.tmpdir(), 'eventmesh-bench-log-'));
  const logFile = path.join(logDir, `${env.EVENTMESH_INSTANCE_ID ?? 'instance'}-${Date.now()}.log`);
  const stdout = openSync(logFile, 'a');
  const child = spawn(process.execPath, [...nodeArgs, path.join(root, 'dist/apps/instance/src/main.js')], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', stdout, 'pipe'],
  });
  closeSync(stdout);
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const deadline = Date.now() + 60000;
  for (;;) {
    const m = /listening on (http:\/\/\S+)/.exec(readFileSync(logFile, 'utf8'));
    if (m) {
      return {
        url: m[1],
        child,
        logFile,
        stop: () =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
            setTimeout(() => child.kill('SIGKILL'), 15000).unref();
          }),
      };
    }
    if (child.exitCode !== null)
      throw new Error(`instance exited: ${err}\n${readFileSync(logFile, 'utf8').slice(-4000)}`);
    if (Date.now() > deadline) throw new Error(`instance not ready in 60 s: ${err}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const TICK_SECONDS = 0.01; // Linux USER_HZ is 100 on every architecture Node supports

/**
 * Fields of /proc/PID/stat after the command name (which may contain spaces): ppid is [1], utime [11], stime [12],
 * cutime [13], cstime [14].
 */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** CPU seconds of a process and every live process below it (a gateway's cluster processes). */
function processCpuSeconds(pid: number): number {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(Number(entry));
    if (fields) parents.set(Number(entry), Number(fields[1]));
  }
  const within = (p: number): boolean => p === pid || (parents.has(p) && p > 1 && within(parents.get(p)!));
  let total = 0;
  let found = false;
  for (const p of parents.keys()) {
    if (!within(p)) continue;
    const fields = statFields(p);
    if (!fields) continue;
    found = true;
    // With the children it has waited for (cutime, cstime): a server's connection processes that ended meanwhile.
    total += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * TICK_SECONDS;
  }
  return found ? total : NaN;
}

function hostCpuSeconds(): number {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: busy = all but idle and iowait
    return (cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6] + cpu[7]) * TICK_SECONDS;
  } catch {
    return NaN;
  }
}

/** The PID of the local Kafka broker the project's infra script started, if any. */
export function brokerPid(): number | undefined {
  return infraPid('kafka/kafka.pid');
}

/** The PID of the local Temporal dev server the project's infra script started, if any. */
export function temporalPid(): number | undefined {
  return infraPid('temporal/temporal.pid');
}

/** A PID file scripts/infra.sh wrote under its data folder (EVENTMESH_INFRA_DATA_DIR, else .data). */
function infraPid(file: string): number | undefined {
  const data = process.env.EVENTMESH_INFRA_DATA_DIR ?? path.join(ROOT, '.data');
  try {
    return Number(readFileSync(path.join(data, file), 'utf8').trim()) || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The Postgres server's PID (its postmaster: the parent of a backend of a connection made with the benchmark's
 * settings), so a run can meter the server with its connection processes; undefined when it is not on this host.
 */
export async function postgresPid(): Promise<number | undefined> {
  const { host, port, database, user, password } = benchConfig().postgres;
  const client = new PgClient({ host, port, database, user, password });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const parent = Number(statFields(rows[0].pid)?.[1]);
    return parent > 1 ? parent : undefined;
  } finally {
    await client.end();
  }
}

/**
 * CPU seconds spent by named processes (and the whole host) between `start` and `stop`, from /proc: where the
 * time of a run went when the client, the runtime and the broker share one host. `self` is this process.
 */
export function meterCpu(pids: Record<string, number | 'self' | undefined>): () => Record<string, number> {
  const read = () => {
    const out: Record<string, number> = { host: hostCpuSeconds() };
    for (const [name, pid] of Object.entries(pids)) {
      if (pid === undefined) continue;
      out[name] = pid === 'self' ? (process.cpuUsage().user + process.cpuUsage().system) / 1e6 : processCpuSeconds(pid);
    }
    return out;
  };
  const before = read();
  return () => {
    const after = read();
    const spent = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]));
    // What the host spent beyond the processes named: work of no arm (another job on the host, a kernel thread),
    // which a round's host figure and its rate carry with them.
    const named = Object.keys(spent).filter((k) => k !== 'host');
    if (named.length > 0) spent.other = spent.host - named.reduce((sum, k) => sum + (spent[k] || 0), 0);
    return spent;
  };
}

/** `client 120 µs, broker 80 µs, host 260 µs` for the CPU a run spent per event. */
export function cpuPerEvent(seconds: Record<string, number>, events: number): string {
  return Object.entries(seconds)
    .map(([name, s]) => `${name} ${Number.isFinite(s) ? Math.round((s / events) * 1e6) : '?'} µs`)
    .join(', ');
}

import { readFileSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import { loadConfig } from '@libs/config';
import { dispatchWorkflowIdOf } from '@libs/temporal/names';
import { kafkaFaultListener, testEnv } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { FaultProxy } from './fault-proxy';
import { INSTANCE_ENTRY } from './repo-root';

/** The broker's fault-test listener (scripts/infra.sh) and the address it advertises, where the Kafka proxy listens. */
const faultListener = kafkaFaultListener();
export const KAFKA_FAULTS_TARGET = { host: faultListener.host, port: faultListener.port };
export const KAFKA_FAULTS_ADVERTISED_PORT = faultListener.advertisedPort;

export interface InstanceOptions {
  id: string;
  /** Settings of the instance (EVENTMESH_*), on top of the test settings. */
  env: Record<string, string>;
  /** Put a fault proxy between the instance and Postgres / Temporal (its own), or use the shared Kafka proxy. */
  proxyPostgres?: boolean;
  proxyTemporal?: boolean;
  kafkaProxy?: FaultProxy;
}

/** One structured log line of an instance (pino). */
interface LogEntry {
  level?: number;
  time?: string | number;
  logger?: string;
  msg?: string;
  error?: unknown;
}

export type InstanceState = 'up' | 'paused' | 'killed' | 'stopped';

/**
 * One runtime instance process under test, with its links: a fixed HTTP port, a fault proxy to Postgres and to
 * Temporal when asked, and the shared Kafka proxy when given. It can be killed (SIGKILL), paused (SIGSTOP),
 * resumed (SIGCONT) and restarted under the same instance id.
 */
export class FaultInstance {
  process?: InstanceProcess;
  state: InstanceState = 'stopped';
  postgres?: FaultProxy;
  temporal?: FaultProxy;
  private port = 0;
  private env: Record<string, string> = {};
  /** Output of the processes this instance ran before the current one. */
  private earlierOutput = '';

  constructor(readonly options: InstanceOptions) {}

  get id(): string {
    return this.options.id;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The gateway URL while the instance is up, else undefined. */
  get api(): string | undefined {
    return this.state === 'up' ? this.url : undefined;
  }

  get pid(): number | undefined {
    return this.process?.child.pid;
  }

  async start(): Promise<void> {
    const first = this.port === 0;
    if (first) {
      const config = loadConfig(testEnv(this.options.env));
      // The first start binds a port the system picks as it listens (a port picked before, then bound by the
      // instance, can be taken in between by any connection of the host); restarts keep it (below).
      const env: Record<string, string> = {
        ...this.options.env,
        EVENTMESH_INSTANCE_ID: this.id,
        EVENTMESH_HTTP_PORT: '0',
      };
      if (this.options.proxyPostgres) {
        this.postgres = new FaultProxy(config.postgres.host, config.postgres.port);
        await this.postgres.start();
        env.EVENTMESH_POSTGRES_HOST = '127.0.0.1';
        env.EVENTMESH_POSTGRES_PORT = String(this.postgres.port);
      }
      if (this.options.proxyTemporal) {
        const [host, port] = config.temporal.address.split(':');
        this.temporal = new FaultProxy(host, Number(port));
        env.EVENTMESH_TEMPORAL_ADDRESS = await this.temporal.start();
      }
      if (this.options.kafkaProxy) env.EVENTMESH_KAFKA_BROKERS = this.options.kafkaProxy.address;
      this.env = env;
    }
    if (this.process) this.earlierOutput += this.process.stdout + this.process.stderr;
    this.process = InstanceProcess.spawn(this.env, INSTANCE_ENTRY);
    const url = await this.process.ready(90000);
    if (first) {
      this.port = Number(new URL(url).port);
      this.env.EVENTMESH_HTTP_PORT = String(this.port);
    }
    this.state = 'up';
  }

  /** SIGKILL: the process ends at once, with nothing flushed or committed. */
  async kill(): Promise<void> {
    this.state = 'killed';
    this.process?.child.kill('SIGKILL');
    await this.process?.exit(60000);
  }

  /** SIGSTOP: the process holds its connections and does nothing until {@link resume}. */
  pause(): void {
    this.state = 'paused';
    this.process?.child.kill('SIGSTOP');
  }

  resume(): void {
    this.process?.child.kill('SIGCONT');
    this.state = 'up';
  }

  /** A fresh process under the same instance id and port (after a kill, or a graceful stop). */
  async restart(): Promise<void> {
    if (this.state === 'paused') this.resume();
    if (this.process && this.process.child.exitCode === null && this.process.child.signalCode === null)
      await this.kill();
    await this.start();
  }

  /** SIGTERM (SIGKILL after 20 s), then closes its proxies. */
  async stop(): Promise<void> {
    if (this.state === 'paused') this.resume();
    this.state = 'stopped';
    await this.process?.stop(20000);
    await this.postgres?.stop();
    await this.temporal?.stop();
  }

  /** Everything the instance's processes wrote (stdout and stderr), the earlier processes first. */
  output(): string {
    return this.earlierOutput + (this.process ? this.process.stdout + this.process.stderr : '');
  }

  /** The warnings and errors (level 40 and up) the instance logged, each with its raw line, in order. */
  private warningEntries(): { line: string; entry: LogEntry }[] {
    const out: { line: string; entry: LogEntry }[] = [];
    for (const line of this.output().split('\n')) {
      if (!line.startsWith('{')) continue;
      let entry: LogEntry;
      try {
        entry = JSON.parse(line) as LogEntry;
      } catch {
        continue; // not a log line
      }
      if ((entry.level ?? 0) >= 40) out.push({ line, entry });
    }
    return out;
  }

  /** The warning and error lines the instance logged since `sinceMs` (epoch ms), the last `limit` of them. */
  warningLines(sinceMs: number, limit = 80): string[] {
    return (
      this.warningEntries()
        // The orphans of the suite's earlier tests (other instances' subscriptions in the shared database) say
        // nothing of this instance and would crowd out what does.
        .filter(({ entry }) => entry.logger !== 'OrphanTakeover' && new Date(entry.time ?? 0).getTime() >= sinceMs)
        .map(({ line }) => line.slice(0, 1200))
        .slice(-limit)
    );
  }

  /**
   * The instance's warnings and errors as a compact timeline (`time level logger: message [error]`), the last
   * `limit` entries: a run of the same message is one entry with its count, and the Kafka client's reconnect
   * attempts (one per retry while a broker is down) and the orphans of earlier tests are left out, so a failed case
   * shows what happened when.
   */
  timeline(limit = 40): string[] {
    const entries: { at: string; text: string; count: number }[] = [];
    for (const { entry } of this.warningEntries()) {
      const msg = entry.msg ?? '';
      if (entry.logger === 'OrphanTakeover' || /ECONNREFUSED|Failed to connect to seed broker/.test(msg)) continue;
      const error =
        entry.error === undefined
          ? ''
          : ` [${(typeof entry.error === 'string' ? entry.error : JSON.stringify(entry.error)).slice(0, 120)}]`;
      const text = `${entry.level === 40 ? 'W' : 'E'} ${entry.logger ?? '-'}: ${msg.slice(0, 120)}${error}`;
      const last = entries[entries.length - 1];
      if (last && last.text === text) last.count++;
      else entries.push({ at: String(entry.time ?? '').slice(11, 23), text, count: 1 });
    }
    return entries.slice(-limit).map((e) => `${e.at} ${e.text}${e.count > 1 ? ` (x${e.count})` : ''}`);
  }

  /** Warnings and errors the instance logged (every process it ran), counted by message: what an operator sees. */
  warnings(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const { entry } of this.warningEntries()) {
      const key = `${entry.level === 40 ? 'warn' : 'error'}: ${(entry.msg ?? '').slice(0, 100)}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return counts;
  }

  /** Resident memory of the process (VmRSS of /proc/<pid>/status), in MB. */
  rssMb(): number {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
    return kb / 1024;
  }
}

/** Ends the dispatch workflows of instances a run started (in the namespace their settings name). */
export async function endDispatchWorkflows(env: Record<string, string>, instanceIds: string[]): Promise<void> {
  const config = loadConfig(testEnv(env)).temporal;
  const connection = await Connection.connect({ address: config.address });
  try {
    const client = new Client({ connection, namespace: config.namespace });
    await Promise.all(
      instanceIds.map((id) =>
        client.workflow
          .getHandle(dispatchWorkflowIdOf(id))
          .terminate('fault run finished')
          .catch(() => undefined),
      ),
    );
  } finally {
    await connection.close();
  }
}

/**
 * The epoch of an instance's dispatch run (`dispatch_runs`), read directly from Postgres (not through any fault
 * proxy): each attempt of the dispatch activity claims the next one, so a change says a new attempt ran.
 */
export async function dispatchEpochOf(env: Record<string, string>, instanceId: string): Promise<number> {
  const rows = await queryPostgres<{ epoch: string }>(env, 'SELECT epoch FROM dispatch_runs WHERE instance_id = $1', [
    instanceId,
  ]);
  return rows[0] ? Number(rows[0].epoch) : 0;
}

/** One query of the instances' database, made directly (not through any fault proxy), on a connection of its own. */
export async function queryPostgres<T extends object>(
  env: Record<string, string>,
  sql: string,
  params: unknown[],
): Promise<T[]> {
  const pg = loadConfig(testEnv(env)).postgres;
  const client = new PgClient({
    host: pg.host,
    port: pg.port,
    user: pg.user,
    password: pg.password,
    database: pg.database,
    connectionTimeoutMillis: 5000,
  });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/**
 * The dispatch workflow's pending activity, as the Temporal server sees it: its attempt, and its last heartbeat
 * (when the server recorded it, and how long ago that is by this host's clock).
 */
export async function dispatchActivityOf(
  env: Record<string, string>,
  instanceId: string,
): Promise<{ attempt: number; state: string; heartbeatAt?: number; heartbeatAgeMs?: number } | undefined> {
  const config = loadConfig(testEnv(env)).temporal;
  const connection = await Connection.connect({ address: config.address });
  try {
    const client = new Client({ connection, namespace: config.namespace });
    const described = await client.workflow.getHandle(dispatchWorkflowIdOf(instanceId)).describe();
    const pending = described.raw.pendingActivities?.[0];
    if (!pending) return undefined;
    const beat = pending.lastHeartbeatTime;
    const beatMs = beat?.seconds ? Number(beat.seconds) * 1000 + Math.floor((beat.nanos ?? 0) / 1e6) : undefined;
    const states = ['UNSPECIFIED', 'SCHEDULED', 'STARTED', 'CANCEL_REQUESTED', 'PAUSED', 'PAUSE_REQUESTED'];
    return {
      attempt: pending.attempt ?? 0,
      state: states[pending.state ?? 0] ?? String(pending.state),
      heartbeatAt: beatMs,
      heartbeatAgeMs: beatMs === undefined ? undefined : Date.now() - beatMs,
    };
  } finally {
    await connection.close();
  }
}

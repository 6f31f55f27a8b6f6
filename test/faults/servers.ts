import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { Client } from 'pg';
import { REPO_ROOT } from './repo-root';

/**
 * Faults of the shared servers (scripts/infra.sh runs them): the Kafka broker killed (`kill -9`) or stopped
 * cleanly (SIGTERM: a controlled shutdown) and started; Postgres stopped at once (`pg_ctl stop -m immediate`, a
 * crash: no checkpoint, recovery at start) or cleanly (`-m fast`: a checkpoint, no recovery) and started; the
 * Temporal dev server killed (`kill -9`) or stopped cleanly (SIGTERM) and started (its state is in a SQLite file,
 * so it survives). These disturb
 * every user of the servers: only a test holding the shared lock may call them, and it must call
 * {@link restoreServers} before it ends (in `finally`/`afterAll`), which starts what is down and waits until it
 * answers.
 */
const ROOT = REPO_ROOT;
/**
 * The servers' state and tools by their real paths: in a worktree, .data and .tools are links to the main
 * checkout's, and a server restarted through a link would depend on this worktree staying where it is. The state
 * is where scripts/infra.sh keeps it for these settings: EVENTMESH_INFRA_DATA_DIR when set (scripts/test.sh runs
 * the fault tier against a second set of servers of its own there), .data otherwise.
 */
const DATA = realpathSync(process.env.EVENTMESH_INFRA_DATA_DIR ?? path.join(ROOT, '.data'));
const TOOLS = realpathSync(path.join(ROOT, '.tools'));
const run = promisify(execFile);

/** Options of scripts/infra.sh: the machine's EVENTMESH_* addresses. */
function infraEnv(): NodeJS.ProcessEnv {
  return { ...process.env, EVENTMESH_INFRA_DATA_DIR: DATA, EVENTMESH_INFRA_TOOLS_DIR: TOOLS };
}

async function infra(command: 'start', server: 'kafka' | 'postgres' | 'temporal' | 'all'): Promise<void> {
  await run('bash', [path.join(ROOT, 'scripts/infra.sh'), command, server], { env: infraEnv(), timeout: 240000 });
}

/** The pid scripts/infra.sh wrote for a server it started. */
function pidOf(server: 'kafka' | 'temporal'): number | undefined {
  try {
    return Number(readFileSync(path.join(DATA, `${server}/${server}.pid`), 'utf8').trim()) || undefined;
  } catch {
    return undefined;
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** `kill -9` of the broker scripts/infra.sh started; resolves once the process is gone. */
export async function killKafka(): Promise<void> {
  await signalServer('kafka', 'SIGKILL', 60000);
}

/**
 * SIGTERM to the broker scripts/infra.sh started: a clean shutdown (the broker closes its logs and the KRaft
 * controller steps down); resolves once the process is gone.
 */
export async function stopKafka(): Promise<void> {
  await signalServer('kafka', 'SIGTERM', 60000);
}

async function signalServer(server: 'kafka' | 'temporal', signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
  const pid = pidOf(server);
  if (!pid || !alive(pid)) throw new Error(`no ${server} server started by scripts/infra.sh is running`);
  process.kill(pid, signal);
  await waitUntil(`the ${server} process to end after ${signal}`, () => !alive(pid), timeoutMs);
}

/** Starts the broker again and waits until it serves requests (a metadata round trip). */
export async function startKafka(): Promise<void> {
  await infra('start', 'kafka');
  await waitUntil('Kafka to answer', () => kafkaAnswers(), 120000);
}

/** The bin folder of the Postgres server scripts/infra.sh runs (the newest installed). */
function pgBin(): string {
  const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
  return path.join('/usr/lib/postgresql', versions[0], 'bin');
}

const PGDATA = path.join(DATA, 'postgres/pgdata');

/** `pg_ctl stop -m immediate` of the cluster in .data/postgres: every backend dies at once, like a crash. */
export async function stopPostgresImmediately(): Promise<void> {
  await pgCtlStop('immediate');
}

/**
 * `pg_ctl stop -m fast` of the cluster in .data/postgres: a clean shutdown (sessions are ended, open
 * transactions rolled back, a checkpoint written); no recovery at the next start.
 */
export async function stopPostgresFast(): Promise<void> {
  await pgCtlStop('fast');
}

async function pgCtlStop(mode: 'immediate' | 'fast'): Promise<void> {
  const asPostgres = process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--'] : [];
  const [cmd, ...args] = [...asPostgres, path.join(pgBin(), 'pg_ctl'), '-D', PGDATA, '-m', mode, '-w', 'stop'];
  await run(cmd, args, { timeout: 60000 });
}

/** Starts Postgres again (crash recovery) and waits until it answers a query. */
export async function startPostgres(): Promise<void> {
  await infra('start', 'postgres');
  await waitUntil('Postgres to answer', () => postgresAnswers(), 120000);
}

/** `kill -9` of the Temporal dev server scripts/infra.sh started; resolves once the process is gone. */
export async function killTemporal(): Promise<void> {
  await signalServer('temporal', 'SIGKILL', 60000);
}

/**
 * SIGTERM to the Temporal dev server scripts/infra.sh started: a clean shutdown (it closes its connections and
 * its SQLite file); resolves once the process is gone.
 */
export async function stopTemporal(): Promise<void> {
  await signalServer('temporal', 'SIGTERM', 60000);
}

/** Starts the Temporal dev server again (`scripts/infra.sh start temporal`) and waits until its frontend serves. */
export async function startTemporal(): Promise<void> {
  await infra('start', 'temporal');
  await waitUntil('Temporal to answer', () => temporalAnswers(), 120000);
}

/** Starts whichever server is down and waits until each answers. Always call it before a server-fault test ends. */
export async function restoreServers(): Promise<void> {
  if (!(await postgresAnswers())) await startPostgres();
  if (!(await kafkaAnswers())) await startKafka();
  if (!(await temporalAnswers())) await startTemporal();
}

/** Whether the Temporal frontend answers a health check within 2 s. */
export async function temporalAnswers(): Promise<boolean> {
  const address = process.env.EVENTMESH_TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, connectTimeout: 2000 });
    const answer = await connection.withDeadline(Date.now() + 2000, () => connection!.healthService.check({}));
    return answer.status === 1; // SERVING
  } catch {
    return false;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

export async function postgresAnswers(): Promise<boolean> {
  const client = new Client({
    host: process.env.EVENTMESH_POSTGRES_HOST ?? '127.0.0.1',
    port: Number(process.env.EVENTMESH_POSTGRES_PORT ?? 5432),
    user: process.env.EVENTMESH_POSTGRES_USER ?? 'eventmesh',
    password: process.env.EVENTMESH_POSTGRES_PASSWORD ?? 'eventmesh',
    database: 'postgres',
    connectionTimeoutMillis: 2000,
  });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Whether the broker answers an ApiVersions request on its client port (it does only once it serves). */
export function kafkaAnswers(): Promise<boolean> {
  const [host, port] = (process.env.EVENTMESH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(',')[0].split(':');
  return new Promise((resolve) => {
    const socket = connect(Number(port), host);
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => {
      // ApiVersions v0: size, api key 18, version 0, correlation id 1, client id "faults".
      const clientId = Buffer.from('faults');
      const body = Buffer.alloc(2 + 2 + 4 + 2 + clientId.length);
      body.writeInt16BE(18, 0);
      body.writeInt16BE(0, 2);
      body.writeInt32BE(1, 4);
      body.writeInt16BE(clientId.length, 8);
      clientId.copy(body, 10);
      const size = Buffer.alloc(4);
      size.writeInt32BE(body.length);
      socket.write(Buffer.concat([size, body]));
    });
    socket.on('data', (d) => done(d.length >= 4));
  });
}

async function waitUntil(what: string, probe: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

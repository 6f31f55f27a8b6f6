import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { EventMeshClient } from '@eventmesh/client';
import { Client } from 'pg';
import { testEnv, uniqueTopic } from './env';
import { InstanceProcess } from './instance-process';

/** The built connector runtime entry (`npm run connectors`). */
export const CONNECTORS_MAIN = path.resolve(__dirname, '../../dist/apps/connectors/src/main.js');

/** A connector runtime replica process against the mesh at `meshUrl`, with test settings. */
export function spawnConnectors(replicaId: string, meshUrl: string, overrides: Record<string, string> = {}) {
  return InstanceProcess.spawn(
    {
      EVENTMESH_CONNECTORS_HTTP_PORT: '0',
      EVENTMESH_CONNECTORS_MESH_URL: meshUrl,
      EVENTMESH_CONNECTORS_REPLICA_ID: replicaId,
      EVENTMESH_CONNECTORS_HEARTBEAT_MS: '3000',
      // The jobs' databases are on this machine.
      EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES: 'loopback',
      ...overrides,
    },
    CONNECTORS_MAIN,
  );
}

/**
 * The database of the "application" the jobs read from and write to: another database than the runtime's (the
 * connector runtime refuses a job pointed at the runtime's own), made when missing.
 */
export async function applicationDatabase(name = 'eventmesh_connectors_app'): Promise<{
  connection: { host: string; port: number; database: string; user: string; password: string };
  client(): Promise<Client>;
}> {
  const env = testEnv();
  const base = {
    host: env.EVENTMESH_POSTGRES_HOST ?? '127.0.0.1',
    port: Number(env.EVENTMESH_POSTGRES_PORT ?? 5432),
    user: env.EVENTMESH_POSTGRES_USER ?? 'eventmesh',
    password: env.EVENTMESH_POSTGRES_PASSWORD ?? 'eventmesh',
  };
  const admin = new Client({ ...base, database: env.EVENTMESH_POSTGRES_DATABASE });
  await admin.connect();
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const connection = { ...base, database: name };
  return {
    connection,
    async client() {
      const c = new Client(connection);
      await c.connect();
      return c;
    },
  };
}

/**
 * A caller of the admin API at `base()` (read at each call: the replica asked may change under a test), with
 * `token` as its bearer credential when given: the answer's status and parsed body.
 */
export function adminCaller<B>(base: () => string, token?: string) {
  return async (method: string, path: string, body?: unknown): Promise<{ status: number; body: B | undefined }> => {
    const res = await fetch(`${base()}${path}`, {
      method,
      signal: AbortSignal.timeout(30000),
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as B) : undefined };
  };
}

/** An outbox table as docs/connectors.md describes it (`topic`: with a destination topic column). */
export async function createOutbox(db: Client, table: string, options: { topic?: boolean } = {}): Promise<void> {
  await db.query(`CREATE TABLE ${table} (
    id bigserial PRIMARY KEY, txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    aggregatetype text, aggregateid text, type text,${options.topic ? ' topic text,' : ''} payload jsonb)`);
  await db.query(`CREATE INDEX ON ${table} (txid, id)`);
}

/** The names of one test's outbox -> mesh -> table pipeline, unique to it. */
export function pipelineNames(prefix: string) {
  const tag = randomUUID().slice(0, 6);
  return {
    tag,
    topic: uniqueTopic(prefix),
    instanceId: `${prefix}-${tag}`,
    outbox: `outbox_${tag}`,
    sinkTable: `orders_${tag}`,
  };
}

/**
 * A STREAM subscription to `topic` at the instance at `url` (acks timing out after 5 s), batched as docs/connectors.md
 * advises (batches of up to 500 events): what a table sink
 * consumes.
 */
export function sinkSubscription(url: string, topic: string): Promise<{ id: string }> {
  return new EventMeshClient({ url }).subscriptions.create({
    protocol: 'STREAM',
    topic,
    config: { ackTimeoutMs: 5000, batch: { maxEvents: 500 } },
  } as never);
}

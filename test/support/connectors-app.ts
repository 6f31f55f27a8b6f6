import path from 'node:path';
import { Client } from 'pg';
import { testEnv } from './env';
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

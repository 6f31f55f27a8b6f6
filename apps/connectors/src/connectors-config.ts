import { EventMeshConfig, loadConfig } from '@libs/config';

type Env = Record<string, string | undefined>;

/**
 * The connector runtime's configuration: the runtime's own settings it shares (Postgres, Temporal, the admin gate
 * and its token keys, the secrets keys, the sink address rules, logging), read by libs/config, and the few of its
 * own below, read here once at boot. An invalid value stops the boot with the setting named.
 */
export interface ConnectorsConfig {
  shared: EventMeshConfig;
  /** EVENTMESH_CONNECTORS_HTTP_PORT: where `/admin/jobs` and `/health` listen (0: a free port; default 3100). */
  port: number;
  /** EVENTMESH_CONNECTORS_HTTP_HOST (default 127.0.0.1). */
  host: string;
  /** EVENTMESH_CONNECTORS_MESH_URL: the event runtime's gateway the jobs publish to and consume from. */
  meshUrl: string;
  /** EVENTMESH_CONNECTORS_RUN_MS: one run of a job's activity before it returns and a new epoch is claimed. */
  runMs: number;
  /** EVENTMESH_CONNECTORS_HEARTBEAT_MS: a replica silent this long loses its jobs to another (default 10 000). */
  heartbeatMs: number;
  /** EVENTMESH_CONNECTORS_REPLICA_ID: this replica's name in job_runs.owner and logs (default host:pid). */
  replicaId: string;
}

export function loadConnectorsConfig(env: Env): ConnectorsConfig {
  const shared = loadConfig(env);
  const read = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max)
      throw new Error(`${name}=${raw}: expected an integer from ${min} to ${max}`);
    return n;
  };
  const meshUrl = env.EVENTMESH_CONNECTORS_MESH_URL ?? `http://127.0.0.1:${shared.http.port}`;
  try {
    new URL(meshUrl);
  } catch {
    throw new Error(`EVENTMESH_CONNECTORS_MESH_URL=${meshUrl}: expected an http(s) URL`);
  }
  return {
    shared,
    port: read('EVENTMESH_CONNECTORS_HTTP_PORT', 3100, 0, 65535),
    host: env.EVENTMESH_CONNECTORS_HTTP_HOST || '127.0.0.1',
    meshUrl,
    runMs: read('EVENTMESH_CONNECTORS_RUN_MS', 60000, 1000, 3600000),
    heartbeatMs: read('EVENTMESH_CONNECTORS_HEARTBEAT_MS', 10000, 1000, 600000),
    replicaId: env.EVENTMESH_CONNECTORS_REPLICA_ID || `${env.HOSTNAME ?? 'local'}:${process.pid}`,
  };
}

import { randomUUID } from 'node:crypto';
import { EventMeshConfig, loadConfig } from '@libs/config';

/** The database every integration and e2e test uses; the global setup rebuilds it from the migrations. */
export const TEST_DATABASE = process.env.EVENTMESH_TEST_POSTGRES_DATABASE ?? 'eventmesh_test';

/** The Temporal namespace of the tests (scripts/infra.sh creates it beside the default one). */
export const TEST_NAMESPACE = process.env.EVENTMESH_TEST_TEMPORAL_NAMESPACE ?? 'eventmesh-test';

/**
 * The key tests seal secrets at rest with (EVENTMESH_SECURITY_SECRETS_KEYS, required by an instance): fixed, so
 * instances of one test open each other's secrets. A test key, never a production one.
 */
export const TEST_SECRETS_KEYS = `test:${Buffer.alloc(32, 'eventmesh test secrets key').toString('base64')}`;

/** Both gates on and enforcing, TokenAuth alone (an enforcing ingress gate boots only behind a gated admin API). */
export const GATES_ENFORCING_TOKEN = {
  EVENTMESH_SECURITY_GATE_FILTERS: 'token',
  EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
  EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
  EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
};

/** A tenant quota that sets nothing (each limit the configured default): spread, then set the limits a test wants. */
export const NO_QUOTA = {
  eventsPerSecond: null,
  bytesPerSecond: null,
  burstSeconds: null,
  streamConnections: null,
  subscriptions: null,
};

/** Settings for a test: the machine's EVENTMESH_* addresses, the test database, and the given overrides. */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (k.startsWith('EVENTMESH_') && v !== undefined) env[k] = v;
  return {
    ...env,
    EVENTMESH_POSTGRES_DATABASE: TEST_DATABASE,
    EVENTMESH_TEMPORAL_NAMESPACE: TEST_NAMESPACE,
    EVENTMESH_LOG_LEVEL: 'warn',
    EVENTMESH_SECURITY_SECRETS_KEYS: TEST_SECRETS_KEYS,
    // A free port for every gateway and every worker-only process's probes (several run in one test).
    EVENTMESH_HTTP_PORT: '0',
    ...overrides,
  };
}

/**
 * The real token gate, enforcing and fail-closed on the ingress and the admin API, JWTs checked against the dev
 * signing key's JWKS (libs/security/dev-token.ts: issuer `eventmesh-dev`, audience `eventmesh`); operator tenant `ops`.
 */
export function tokenGateEnv(jwksPath: string): Record<string, string> {
  return {
    EVENTMESH_SECURITY_GATE_FILTERS: 'token',
    EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
    EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
    EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
    EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT: 'ops',
    EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: jwksPath,
    EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: 'eventmesh-dev',
    EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: 'eventmesh',
  };
}

export function testConfig(overrides: Record<string, string> = {}): EventMeshConfig {
  return loadConfig(testEnv(overrides));
}

/** A topic name no other test (or earlier run) uses. */
export function uniqueTopic(prefix = 'test'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/**
 * The broker's fault-test listener and the address it advertises (scripts/infra.sh: the client port + 2 and + 3
 * unless EVENTMESH_INFRA_KAFKA_FAULTS_PORT / _ADVERTISED_PORT say otherwise): a proxy listening on
 * `advertisedPort` and forwarding to `port` carries every request of a client that bootstraps at
 * `host:advertisedPort`. Derived from the settings, so a second set of servers (scripts/test.sh's fault lane)
 * has its own.
 */
export function kafkaFaultListener(env: NodeJS.ProcessEnv = process.env): {
  host: string;
  port: number;
  advertisedPort: number;
} {
  const [host, port] = (env.EVENTMESH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(',')[0].split(':');
  const client = Number(port);
  return {
    host,
    port: Number(env.EVENTMESH_INFRA_KAFKA_FAULTS_PORT ?? client + 2),
    advertisedPort: Number(env.EVENTMESH_INFRA_KAFKA_FAULTS_ADVERTISED_PORT ?? client + 3),
  };
}

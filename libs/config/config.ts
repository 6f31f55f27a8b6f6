import { hostname } from 'node:os';
import { CESQL_DEFAULT_MAX_ATTRIBUTE_CHARS } from '../filter/cesql';

/**
 * The one typed configuration of a runtime instance. It is read from the environment once, at boot, by
 * {@link loadConfig}; nothing else in the project reads `process.env`. Every setting has an environment
 * variable and an `eventmesh.*` name (docs/configuration.md lists them all).
 */

export const DELIVERY_TOPOLOGIES = ['LOCAL_STICKY_PULL', 'PARTITION_OWNED_PULL'] as const;
export type DeliveryTopology = (typeof DELIVERY_TOPOLOGIES)[number];

export const INSTANCE_ROLES = ['gateway', 'worker'] as const;
export type InstanceRole = (typeof INSTANCE_ROLES)[number];

/** What happens to an orphaned subscription (docs/topologies.md#orphaned-subscriptions). */
export const ORPHAN_TAKEOVERS = ['AUTOMATIC', 'MANUAL'] as const;
export type OrphanTakeoverMode = (typeof ORPHAN_TAKEOVERS)[number];

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface EventMeshConfig {
  instance: { id: string; roles: InstanceRole[] };
  http: { host: string; port: number; bodyLimitBytes: number; processes: number; maxConnections: number; maxPendingRequests: number; retryAfterSeconds: number };
  delivery: {
    topology: DeliveryTopology;
    leaseTtlMs: number;
    webhookTimeoutMs: number;
    webhookOrigin: string;
    pollBatchMaxEvents: number;
    retryInitialMs: number;
    retryMaxMs: number;
    maxAttempts: number;
    breakerFailureThreshold: number;
    breakerOpenMs: number;
    breakerMaxOpenMs: number;
    retryMaxParked: number;
    skipWarningMs: number;
    orphanGraceMs: number;
    orphanTakeover: OrphanTakeoverMode;
    deadLetterRetentionDays: number;
  };
  postgres: { host: string; port: number; user: string; password: string; database: string; poolSize: number };
  kafka: {
    brokers: string[];
    clientId: string;
    topics: string[];
    topicPartitions: number;
    replicationFactor: number;
    connectTimeoutMs: number;
    produceLingerMs: number;
    produceMaxBatchEvents: number;
    produceMaxInFlight: number;
    produceQueueMaxEvents: number;
    produceQueueMaxBytes: number;
    publishTimeoutMs: number;
    requestTimeoutMs: number;
  };
  streams: { pollMaxConsumers: number };
  temporal: { address: string; namespace: string; uiUrl: string; connectTimeoutMs: number };
  log: { level: LogLevel };
  filter: { maxAttributeChars: number };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** One setting: where it is read from, what it is called, and how its raw text becomes a value. */
interface Setting<T> {
  env: string;
  key: string;
  parse: (raw: string) => T;
  fallback: () => T;
  doc: string;
  /** How docs show the default, when it depends on the machine. */
  shownDefault?: string;
}

export interface SettingDoc {
  env: string;
  key: string;
  default: string;
  doc: string;
}

const invalid = (legal: string) => {
  throw new SettingValueError(legal);
};

class SettingValueError extends Error {
  constructor(readonly legal: string) {
    super(legal);
  }
}

function integer(min: number, max: number) {
  return (raw: string): number => {
    const n = Number(raw);
    if (!/^-?\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > max) {
      return invalid(`an integer from ${min} to ${max}`);
    }
    return n;
  };
}

function oneOf<T extends string>(values: readonly T[]) {
  return (raw: string): T =>
    (values as readonly string[]).includes(raw) ? (raw as T) : invalid(`one of ${values.join(', ')}`);
}

function listOf<T extends string>(item: (raw: string) => T, what: string) {
  return (raw: string): T[] => {
    const items = raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
    if (items.length === 0) return invalid(`a comma-separated list of ${what}`);
    return items.map(item);
  };
}

const text = (raw: string): string => raw;

const hostPort = (raw: string): string =>
  /^[A-Za-z0-9.\-_[\]:]+:\d{1,5}$/.test(raw) ? raw : invalid('host:port');

const httpUrl = (raw: string): string => {
  try {
    const url = new URL(raw);
    if (url.protocol === 'http:' || url.protocol === 'https:') return raw.replace(/\/+$/, '');
  } catch {
    /* falls through to the error below */
  }
  return invalid('an http(s) URL');
};

const topicName = (raw: string): string =>
  /^[A-Za-z0-9._-]{1,249}$/.test(raw) ? raw : invalid('Kafka topic names ([A-Za-z0-9._-], at most 249 characters)');

const instanceId = (raw: string): string =>
  /^[A-Za-z0-9._-]{1,64}$/.test(raw) ? raw : invalid('1 to 64 characters of [A-Za-z0-9._-]');

function setting<T>(
  env: string,
  key: string,
  parse: (raw: string) => T,
  fallback: () => T,
  doc: string,
  shownDefault?: string,
): Setting<T> {
  return { env, key, parse, fallback, doc, shownDefault };
}

/** Every setting, in the order docs/configuration.md lists them. */
const SETTINGS = {
  instanceId: setting('EVENTMESH_INSTANCE_ID', 'eventmesh.instance.id', instanceId,
    () => hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64),
    'Stable name of this runtime instance; its Temporal task queue and its dispatch workflow are named after it.',
    '(host name)'),
  instanceRoles: setting('EVENTMESH_INSTANCE_ROLES', 'eventmesh.instance.roles',
    listOf(oneOf(INSTANCE_ROLES), INSTANCE_ROLES.join(', ')), () => [...INSTANCE_ROLES] as InstanceRole[],
    'What this process runs: the HTTP gateway, the Temporal worker (dispatch), or both.'),
  httpHost: setting('EVENTMESH_HTTP_HOST', 'eventmesh.http.host', text, () => '127.0.0.1',
    'Address the gateway listens on.'),
  httpPort: setting('EVENTMESH_HTTP_PORT', 'eventmesh.http.port', integer(0, 65535), () => 8080,
    'Port the gateway listens on.'),
  httpBodyLimitBytes: setting('EVENTMESH_HTTP_BODY_LIMIT_BYTES', 'eventmesh.http.bodyLimitBytes',
    integer(1024, 64 * 1024 * 1024), () => 1024 * 1024, 'Largest accepted request body; larger bodies get 413.'),
  httpProcesses: setting('EVENTMESH_HTTP_PROCESSES', 'eventmesh.http.processes', integer(1, 64), () => 1,
    'Gateway processes sharing the port (Node cluster), one per core to spread HTTP work; more than 1 only with EVENTMESH_INSTANCE_ROLES=gateway.'),
  httpMaxConnections: setting('EVENTMESH_HTTP_MAX_CONNECTIONS', 'eventmesh.http.maxConnections', integer(1, 1000000),
    () => 10000, 'Most open HTTP connections per gateway process; a request on a connection past it gets 503 OVERLOADED and the connection is closed.'),
  httpMaxPendingRequests: setting('EVENTMESH_HTTP_MAX_PENDING_REQUESTS', 'eventmesh.http.maxPendingRequests',
    integer(1, 1000000), () => 1000,
    'Most request-replies (POST /events/request) a gateway process holds waiting at once; one more gets 503 OVERLOADED.'),
  httpRetryAfterSeconds: setting('EVENTMESH_HTTP_RETRY_AFTER_SECONDS', 'eventmesh.http.retryAfterSeconds', integer(1, 3600),
    () => 1, 'The Retry-After of a 503 for shed work (OVERLOADED, KAFKA_UNAVAILABLE).'),
  topology: setting('EVENTMESH_DELIVERY_TOPOLOGY', 'eventmesh.delivery.topology', oneOf(DELIVERY_TOPOLOGIES),
    (): DeliveryTopology => 'LOCAL_STICKY_PULL', 'Delivery topology (docs/topologies.md).'),
  leaseTtlMs: setting('EVENTMESH_DELIVERY_LEASE_TTL_MS', 'eventmesh.delivery.leaseTtlMs', integer(3000, 600000),
    () => 10000, 'Heartbeat timeout of the poll-and-dispatch activity: how long a silent owner keeps its lease.'),
  webhookTimeoutMs: setting('EVENTMESH_DELIVERY_WEBHOOK_TIMEOUT_MS', 'eventmesh.delivery.webhookTimeoutMs',
    integer(100, 120000), () => 10000, 'Per-request timeout of a webhook delivery.'),
  webhookOrigin: setting('EVENTMESH_DELIVERY_WEBHOOK_ORIGIN', 'eventmesh.delivery.webhookOrigin', text, () => 'eventmesh',
    'The origin this runtime names in the webhook validation handshake (WebHook-Request-Origin).'),
  pollBatchMaxEvents: setting('EVENTMESH_DELIVERY_POLL_BATCH_MAX_EVENTS', 'eventmesh.delivery.pollBatchMaxEvents',
    integer(1, 100000), () => 500, 'Most events dispatched between two offset commits of one partition.'),
  retryInitialMs: setting('EVENTMESH_DELIVERY_RETRY_INITIAL_MS', 'eventmesh.delivery.retryInitialMs',
    integer(10, 600000), () => 200, 'First delay before a failed delivery is retried.'),
  retryMaxMs: setting('EVENTMESH_DELIVERY_RETRY_MAX_MS', 'eventmesh.delivery.retryMaxMs', integer(10, 3600000),
    () => 30000, 'Longest delay between two retries of a delivery.'),
  maxAttempts: setting('EVENTMESH_DELIVERY_MAX_ATTEMPTS', 'eventmesh.delivery.maxAttempts', integer(1, 1000), () => 10,
    'Attempts of a delivery before it goes to the dead-letter queue (a subscription may set its own).'),
  breakerFailureThreshold: setting('EVENTMESH_DELIVERY_BREAKER_FAILURE_THRESHOLD', 'eventmesh.delivery.breakerFailureThreshold',
    integer(1, 100000), () => 5,
    'Consecutive failed attempts to a subscription\'s sink that open its circuit breaker: its lanes stop fetching and sending, and its parked deliveries wait, until a probe succeeds (docs/delivery.md).'),
  breakerOpenMs: setting('EVENTMESH_DELIVERY_BREAKER_OPEN_MS', 'eventmesh.delivery.breakerOpenMs', integer(100, 3600000),
    () => 1000, 'How long a breaker stays open before one probe delivery (half-open); doubled after each failed probe.'),
  breakerMaxOpenMs: setting('EVENTMESH_DELIVERY_BREAKER_MAX_OPEN_MS', 'eventmesh.delivery.breakerMaxOpenMs',
    integer(100, 3600000), () => 30000, 'Longest open period of a breaker between two probes.'),
  retryMaxParked: setting('EVENTMESH_DELIVERY_RETRY_MAX_PARKED', 'eventmesh.delivery.retryMaxParked', integer(1, 10000000),
    () => 10000,
    'Most deliveries of one subscription parked in the retry table; at the cap a failing event stays at the head of its lane and the offset waits (docs/delivery.md).'),
  skipWarningMs: setting('EVENTMESH_DELIVERY_SKIP_WARNING_MS', 'eventmesh.delivery.skipWarningMs',
    integer(60000, 365 * 24 * 3600 * 1000), () => 7 * 24 * 3600 * 1000,
    'How long /health warns about events Kafka retention deleted before a subscription got them, after the last such skip.'),
  orphanGraceMs: setting('EVENTMESH_DELIVERY_ORPHAN_GRACE_MS', 'eventmesh.delivery.orphanGraceMs',
    integer(6000, 86400000), () => 180000,
    'LOCAL_STICKY_PULL: how long an instance\'s dispatch run may go unrenewed before its subscriptions count as orphaned (at least twice EVENTMESH_DELIVERY_LEASE_TTL_MS).',
    '180000 (or twice the lease TTL, if more)'),
  orphanTakeover: setting('EVENTMESH_DELIVERY_ORPHAN_TAKEOVER', 'eventmesh.delivery.orphanTakeover', oneOf(ORPHAN_TAKEOVERS),
    (): OrphanTakeoverMode => 'AUTOMATIC',
    'LOCAL_STICKY_PULL: AUTOMATIC, live instances take orphaned subscriptions over; MANUAL, orphans are only reported and moved by POST /admin/subscriptions/{id}/move.'),
  deadLetterRetentionDays: setting('EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS',
    'eventmesh.delivery.deadLetterRetentionDays', integer(0, 3650), () => 30,
    'Days a dead letter is kept; the worker deletes older ones in small batches. 0 keeps them until their subscription is deleted.'),
  filterMaxAttributeChars: setting('EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS', 'eventmesh.filter.maxAttributeChars',
    integer(256, 1048576), () => CESQL_DEFAULT_MAX_ATTRIBUTE_CHARS,
    'Longest string a subscription\'s CESQL (`sql`) filter works on in the dispatch loop; an event whose attribute it reads is longer does not match that filter (libs/filter/README.md). A stream client\'s own `filter` uses the default.'),
  pgHost: setting('EVENTMESH_POSTGRES_HOST', 'eventmesh.postgres.host', text, () => '127.0.0.1', 'Postgres host.'),
  pgPort: setting('EVENTMESH_POSTGRES_PORT', 'eventmesh.postgres.port', integer(1, 65535), () => 5432,
    'Postgres port.'),
  pgUser: setting('EVENTMESH_POSTGRES_USER', 'eventmesh.postgres.user', text, () => 'eventmesh', 'Postgres user.'),
  pgPassword: setting('EVENTMESH_POSTGRES_PASSWORD', 'eventmesh.postgres.password', text, () => 'eventmesh',
    'Postgres password.'),
  pgDatabase: setting('EVENTMESH_POSTGRES_DATABASE', 'eventmesh.postgres.database', text, () => 'eventmesh',
    'Postgres database.'),
  pgPoolSize: setting('EVENTMESH_POSTGRES_POOL_SIZE', 'eventmesh.postgres.poolSize', integer(1, 200), () => 10,
    'Connections in the Postgres pool.'),
  kafkaBrokers: setting('EVENTMESH_KAFKA_BROKERS', 'eventmesh.kafka.brokers', listOf(hostPort, 'host:port'),
    () => ['127.0.0.1:9092'], 'Kafka bootstrap brokers.'),
  kafkaClientId: setting('EVENTMESH_KAFKA_CLIENT_ID', 'eventmesh.kafka.clientId', text, () => 'eventmesh',
    'Kafka client id prefix.'),
  kafkaTopics: setting('EVENTMESH_KAFKA_TOPICS', 'eventmesh.kafka.topics', listOf(topicName, 'topic names'),
    () => ['events'], 'Topics the runtime serves; they are created at boot when missing. Others get 404.'),
  kafkaTopicPartitions: setting('EVENTMESH_KAFKA_TOPIC_PARTITIONS', 'eventmesh.kafka.topicPartitions',
    integer(1, 10000), () => 6, 'Partitions of a topic the runtime creates.'),
  kafkaReplicationFactor: setting('EVENTMESH_KAFKA_REPLICATION_FACTOR', 'eventmesh.kafka.replicationFactor',
    integer(1, 32), () => 1, 'Replication factor of a topic the runtime creates.'),
  kafkaConnectTimeoutMs: setting('EVENTMESH_KAFKA_CONNECT_TIMEOUT_MS', 'eventmesh.kafka.connectTimeoutMs',
    integer(100, 120000), () => 5000, 'How long boot waits for Kafka before it gives up.'),
  kafkaProduceLingerMs: setting('EVENTMESH_KAFKA_PRODUCE_LINGER_MS', 'eventmesh.kafka.produceLingerMs',
    integer(0, 1000), () => 1,
    'Longest wait of a publish for others to share its produce request (while one is in flight, they queue anyway).'),
  kafkaProduceMaxBatchEvents: setting('EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS', 'eventmesh.kafka.produceMaxBatchEvents',
    integer(1, 100000), () => 500, 'Most events in one produce request.'),
  kafkaProduceMaxInFlight: setting('EVENTMESH_KAFKA_PRODUCE_MAX_IN_FLIGHT', 'eventmesh.kafka.produceMaxInFlight',
    integer(1, 64), () => 4, 'Most produce requests awaiting their acknowledgement at once.'),
  kafkaProduceQueueMaxEvents: setting('EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_EVENTS', 'eventmesh.kafka.produceQueueMaxEvents',
    integer(1, 10000000), () => 20000,
    'Most events a gateway process holds for Kafka (queued or in flight); a publish past it gets 503 OVERLOADED at once. At least EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS.'),
  kafkaProduceQueueMaxBytes: setting('EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_BYTES', 'eventmesh.kafka.produceQueueMaxBytes',
    integer(1024, 4 * 1024 * 1024 * 1024), () => 64 * 1024 * 1024,
    'Most bytes (keys, values, headers) a gateway process holds for Kafka; a publish past it gets 503 OVERLOADED at once. At least EVENTMESH_HTTP_BODY_LIMIT_BYTES.'),
  kafkaPublishTimeoutMs: setting('EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS', 'eventmesh.kafka.publishTimeoutMs', integer(100, 120000),
    () => 5000, 'Longest a publish waits for Kafka to acknowledge its events; then 503 KAFKA_UNAVAILABLE (never 202).'),
  kafkaRequestTimeoutMs: setting('EVENTMESH_KAFKA_REQUEST_TIMEOUT_MS', 'eventmesh.kafka.requestTimeoutMs', integer(1000, 300000),
    () => 10000, 'Longest the Kafka client waits for the answer to one request (and a broker for the replicas of a produce) before it retries.'),
  streamsPollMaxConsumers: setting('EVENTMESH_STREAMS_POLL_MAX_CONSUMERS', 'eventmesh.streams.pollMaxConsumers',
    integer(1, 100000), () => 100,
    'Most long-poll consumer names one subscription has connected at once (a name is held until it has not polled for a minute); a new name past it gets 429 TOO_MANY_CONSUMERS.'),
  temporalAddress: setting('EVENTMESH_TEMPORAL_ADDRESS', 'eventmesh.temporal.address', hostPort,
    () => '127.0.0.1:7233', 'Temporal frontend address.'),
  temporalNamespace: setting('EVENTMESH_TEMPORAL_NAMESPACE', 'eventmesh.temporal.namespace', text,
    () => 'default', 'Temporal namespace.'),
  temporalUiUrl: setting('EVENTMESH_TEMPORAL_UI_URL', 'eventmesh.temporal.uiUrl', httpUrl,
    () => 'http://127.0.0.1:8233', 'Temporal Web UI, printed at boot and linked from /health.'),
  temporalConnectTimeoutMs: setting('EVENTMESH_TEMPORAL_CONNECT_TIMEOUT_MS', 'eventmesh.temporal.connectTimeoutMs',
    integer(100, 120000), () => 5000, 'How long boot waits for Temporal before it gives up.'),
  logLevel: setting('EVENTMESH_LOG_LEVEL', 'eventmesh.log.level', oneOf(LOG_LEVELS), (): LogLevel => 'info',
    'Log level.'),
};

type Values = { [K in keyof typeof SETTINGS]: ReturnType<(typeof SETTINGS)[K]['fallback']> };

/** Reads and validates every setting; throws one {@link ConfigError} that lists every bad value. */
export function loadConfig(env: Env = process.env): EventMeshConfig {
  const problems: string[] = [];
  const values = {} as Record<string, unknown>;
  for (const [name, s] of Object.entries(SETTINGS) as [string, Setting<unknown>][]) {
    const raw = env[s.env]?.trim();
    if (raw === undefined || raw === '') {
      values[name] = s.fallback();
      continue;
    }
    try {
      values[name] = s.parse(raw);
    } catch (e) {
      const legal = e instanceof SettingValueError ? e.legal : String(e);
      problems.push(`${s.env} (${s.key}) = "${raw}" is not valid; legal values: ${legal}`);
    }
  }
  const v = values as Values;
  if (problems.length === 0 && v.retryMaxMs < v.retryInitialMs) {
    problems.push(`${SETTINGS.retryMaxMs.env} (${SETTINGS.retryMaxMs.key}) must be at least ` +
      `${SETTINGS.retryInitialMs.env} (${v.retryInitialMs})`);
  }
  if (problems.length === 0 && v.breakerMaxOpenMs < v.breakerOpenMs) {
    problems.push(`${SETTINGS.breakerMaxOpenMs.env} (${SETTINGS.breakerMaxOpenMs.key}) must be at least ` +
      `${SETTINGS.breakerOpenMs.env} (${v.breakerOpenMs})`);
  }
  // Unset, the grace follows a long lease TTL; set, it must exceed it.
  if (problems.length === 0 && !env[SETTINGS.orphanGraceMs.env]?.trim()) v.orphanGraceMs = Math.max(v.orphanGraceMs, 2 * v.leaseTtlMs);
  if (problems.length === 0 && v.orphanGraceMs < 2 * v.leaseTtlMs) {
    problems.push(`${SETTINGS.orphanGraceMs.env} (${SETTINGS.orphanGraceMs.key}) = ${v.orphanGraceMs} must be at least twice ` +
      `${SETTINGS.leaseTtlMs.env} (${v.leaseTtlMs}): a live dispatch run renews itself within a lease TTL; legal values: ` +
      `${2 * v.leaseTtlMs} to 86400000`);
  }
  if (problems.length === 0 && v.httpProcesses > 1 && v.instanceRoles.join() !== 'gateway') {
    problems.push(`${SETTINGS.httpProcesses.env} (${SETTINGS.httpProcesses.key}) = ${v.httpProcesses} needs ` +
      `${SETTINGS.instanceRoles.env}=gateway (got "${v.instanceRoles.join(',')}"): the worker role runs once per instance; legal values: 1, ` +
      'or 1 to 64 in a gateway-only instance');
  }
  if (problems.length === 0 && v.kafkaProduceQueueMaxEvents < v.kafkaProduceMaxBatchEvents) {
    problems.push(`${SETTINGS.kafkaProduceQueueMaxEvents.env} (${SETTINGS.kafkaProduceQueueMaxEvents.key}) = ${v.kafkaProduceQueueMaxEvents} ` +
      `is below ${SETTINGS.kafkaProduceMaxBatchEvents.env} (${v.kafkaProduceMaxBatchEvents}), so a full batch could never be taken; ` +
      `legal values: an integer from ${v.kafkaProduceMaxBatchEvents} to 10000000`);
  }
  if (problems.length === 0 && v.kafkaProduceQueueMaxBytes < v.httpBodyLimitBytes) {
    problems.push(`${SETTINGS.kafkaProduceQueueMaxBytes.env} (${SETTINGS.kafkaProduceQueueMaxBytes.key}) = ${v.kafkaProduceQueueMaxBytes} ` +
      `is below ${SETTINGS.httpBodyLimitBytes.env} (${v.httpBodyLimitBytes}), so the largest publish could never be taken; ` +
      `legal values: an integer from ${v.httpBodyLimitBytes} to ${4 * 1024 * 1024 * 1024}`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    instance: { id: v.instanceId, roles: v.instanceRoles },
    http: {
      host: v.httpHost,
      port: v.httpPort,
      bodyLimitBytes: v.httpBodyLimitBytes,
      processes: v.httpProcesses,
      maxConnections: v.httpMaxConnections,
      maxPendingRequests: v.httpMaxPendingRequests,
      retryAfterSeconds: v.httpRetryAfterSeconds,
    },
    delivery: {
      topology: v.topology,
      leaseTtlMs: v.leaseTtlMs,
      webhookTimeoutMs: v.webhookTimeoutMs,
      webhookOrigin: v.webhookOrigin,
      pollBatchMaxEvents: v.pollBatchMaxEvents,
      retryInitialMs: v.retryInitialMs,
      retryMaxMs: v.retryMaxMs,
      maxAttempts: v.maxAttempts,
      breakerFailureThreshold: v.breakerFailureThreshold,
      breakerOpenMs: v.breakerOpenMs,
      breakerMaxOpenMs: v.breakerMaxOpenMs,
      retryMaxParked: v.retryMaxParked,
      skipWarningMs: v.skipWarningMs,
      orphanGraceMs: v.orphanGraceMs,
      orphanTakeover: v.orphanTakeover,
      deadLetterRetentionDays: v.deadLetterRetentionDays,
    },
    postgres: {
      host: v.pgHost,
      port: v.pgPort,
      user: v.pgUser,
      password: v.pgPassword,
      database: v.pgDatabase,
      poolSize: v.pgPoolSize,
    },
    kafka: {
      brokers: v.kafkaBrokers,
      clientId: v.kafkaClientId,
      topics: v.kafkaTopics,
      topicPartitions: v.kafkaTopicPartitions,
      replicationFactor: v.kafkaReplicationFactor,
      connectTimeoutMs: v.kafkaConnectTimeoutMs,
      produceLingerMs: v.kafkaProduceLingerMs,
      produceMaxBatchEvents: v.kafkaProduceMaxBatchEvents,
      produceMaxInFlight: v.kafkaProduceMaxInFlight,
      produceQueueMaxEvents: v.kafkaProduceQueueMaxEvents,
      produceQueueMaxBytes: v.kafkaProduceQueueMaxBytes,
      publishTimeoutMs: v.kafkaPublishTimeoutMs,
      requestTimeoutMs: v.kafkaRequestTimeoutMs,
    },
    streams: { pollMaxConsumers: v.streamsPollMaxConsumers },
    temporal: {
      address: v.temporalAddress,
      namespace: v.temporalNamespace,
      uiUrl: v.temporalUiUrl,
      connectTimeoutMs: v.temporalConnectTimeoutMs,
    },
    log: { level: v.logLevel },
    filter: { maxAttributeChars: v.filterMaxAttributeChars },
  };
}

/** The settings table, for docs and `--help`-style listings. */
export function describeSettings(): SettingDoc[] {
  return Object.values(SETTINGS).map((s: Setting<unknown>) => {
    const d = s.fallback();
    const shown = s.shownDefault ?? (Array.isArray(d) ? d.join(',') : String(d));
    return { env: s.env, key: s.key, default: shown, doc: s.doc };
  });
}

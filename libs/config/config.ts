import { hostname } from 'node:os';
import { CESQL_DEFAULT_MAX_ATTRIBUTE_CHARS } from '@libs/filter';
import {
  Env,
  Setting,
  SettingDoc,
  SettingValueError,
  integer,
  decimal,
  oneOf,
  listOf,
  text,
  bool,
  claimName,
  tokenType,
  tenantName,
  secretKeys,
  optionalWebhookSecret,
  scrapeSecret,
  superUser,
  optionalHttpUrl,
  hostPort,
  httpUrl,
  topicName,
  instanceId,
  setting,
} from './setting';

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
export const SHARED_TOPIC_ACCESS = ['OPEN', 'GRANTED'] as const;
export type SharedTopicAccess = (typeof SHARED_TOPIC_ACCESS)[number];
export type OrphanTakeoverMode = (typeof ORPHAN_TAKEOVERS)[number];

/** The filters of the request gate, always run in this order (docs/security.md). */
export const GATE_FILTERS = ['token', 'signature', 'acl', 'quota'] as const;
export type GateFilterName = (typeof GATE_FILTERS)[number];
/** The filters the admin API's gate can run. */
export const ADMIN_GATE_FILTERS = ['token', 'acl'] as const;
export type AdminGateFilterName = (typeof ADMIN_GATE_FILTERS)[number];
export const AUDIT_SINKS = ['LOG', 'CLOUDEVENTS'] as const;
export type AuditSinkKind = (typeof AUDIT_SINKS)[number];
export const AUDIT_RECORDS = ['ALL', 'DENIALS'] as const;
export type AuditRecordMode = (typeof AUDIT_RECORDS)[number];
export const ACL_DEFAULTS = ['DENY', 'ALLOW'] as const;
export type AclDefault = (typeof ACL_DEFAULTS)[number];
/** JWS algorithms a token may be signed with: asymmetric only, so a public key can never serve as an HMAC secret. */
export const TOKEN_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;
export type TokenAlgorithm = (typeof TOKEN_ALGORITHMS)[number];
/** Address ranges a webhook sink may resolve to besides public ones; link-local and metadata never. */
export const SINK_RANGES = ['loopback', 'private'] as const;
export type SinkRange = (typeof SINK_RANGES)[number];

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** How log lines are written: JSON lines, human-readable (pino-pretty), or pretty only when stdout is a terminal. */
export const LOG_FORMATS = ['json', 'pretty', 'auto'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
/** Which HTTP requests get an access log line: all, those answered 4xx or 5xx, or none. */
export const ACCESS_LOGS = ['all', 'errors', 'off'] as const;
export type AccessLogMode = (typeof ACCESS_LOGS)[number];

export interface EventMeshConfig {
  /** `advertisedUrl`: where other instances reach this one's internal channel; '' = derived from the listen address at boot. */
  instance: { id: string; roles: InstanceRole[]; advertisedUrl: string };
  /**
   * `headersTimeoutMs`, `requestTimeoutMs`: how long a client may take to send a request's headers, and the whole
   * request with its body; `keepAliveTimeoutMs`: how long an idle connection between two requests stays open. None
   * cuts an answer under way (a long-poll, a request-reply, a stream): they stop once the request is read.
   */
  http: {
    host: string;
    port: number;
    bodyLimitBytes: number;
    processes: number;
    maxConnections: number;
    maxPendingRequests: number;
    maxPendingRequestsPerTenant: number;
    retryAfterSeconds: number;
    headersTimeoutMs: number;
    requestTimeoutMs: number;
    keepAliveTimeoutMs: number;
  };
  delivery: {
    topology: DeliveryTopology;
    leaseTtlMs: number;
    /** PARTITION_OWNED_PULL: the partition loops one instance runs at once (its activity worker's slots). */
    maxOwnedPartitions: number;
    webhookTimeoutMs: number;
    webhookOrigin: string;
    pollBatchMaxEvents: number;
    /** Deliveries out at once per partition of a webhook subscription with ordering `key` or `none`. */
    concurrency: number;
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
    /** Events per second a dead-letter replay sends when its request names no rate. */
    deadLetterReplayRate: number;
  };
  postgres: {
    host: string;
    port: number;
    user: string;
    password: string;
    database: string;
    poolSize: number;
    dispatchPoolSize: number;
    queryTimeoutMs: number;
    leakDetectionThresholdMs: number;
  };
  kafka: {
    brokers: string[];
    clientId: string;
    topics: string[];
    topicPartitions: number;
    /** Most topics of its own a tenant may have (`POST /topics`), and most partitions each may have. */
    tenantTopicsMax: number;
    tenantTopicMaxPartitions: number;
    /** Who uses the shared topics: every tenant (OPEN), or the operator tenant and the tenants granted (GRANTED). */
    sharedTopicAccess: SharedTopicAccess;
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
  /** Streaming sessions (docs/streaming-sessions.md): flow control, bounds, per-tenant caps, Mode 2's history. */
  sessions: SessionsConfig;
  /** `pushSigningSecret`: the Standard Webhooks secret A2A push notifications are signed with ('' = unsigned). */
  agents: {
    callTimeoutMs: number;
    taskTimeoutMs: number;
    sendWaitMs: number;
    heartbeatTtlMs: number;
    maxStreams: number;
    streamPollMs: number;
    streamHeartbeatMs: number;
    pushSigningSecret: string;
    taskRetentionDays: number;
    workerSlots: number;
    maxAnswerBytes: number;
    maxPerTenant: number;
  };
  temporal: { address: string; namespace: string; uiUrl: string; connectTimeoutMs: number };
  /** `sinkFailureSummaryMs`: how often the repeated failures of one sink are summarised in one line. */
  log: { level: LogLevel; format: LogFormat; access: AccessLogMode; sinkFailureSummaryMs: number };
  /** W3C trace context and OpenTelemetry spans (docs/operations.md#tracing); `otlpEndpoint` '' = spans are not exported. */
  tracing: { enabled: boolean; otlpEndpoint: string; serviceName: string; sampleRatio: number };
  /**
   * `GET /metrics` (docs/operations.md#metrics): `adminGate` puts it behind the admin API's gate; `temporalAddress` is
   * where the Temporal core's own Prometheus exporter listens ('' = a free loopback port, merged into /metrics;
   * 'off' = none).
   */
  metrics: {
    enabled: boolean;
    adminGate: boolean;
    temporalAddress: string;
    scrapeSecret: string;
    subscriptionLabels: boolean;
  };
  /** `/health/ready` and `/health`: how long a dependency check is reused, and when a dispatch loop counts as stalled. */
  health: { checkCacheMs: number; dispatchStaleMs: number };
  filter: { maxAttributeChars: number };
  security: SecurityConfig;
  admin: { security: { filters: AdminGateFilterName[]; failClosed: boolean; operatorTenant: string } };
}

/** Streaming sessions (docs/streaming-sessions.md#limits). */
export interface SessionsConfig {
  windowBytes: number;
  maxWindowBytes: number;
  maxChunkBytes: number;
  maxRequestBytes: number;
  openTimeoutMs: number;
  maxWaitMs: number;
  heartbeatMs: number;
  maxPerTenant: number;
  maxAgentsPerTenant: number;
  maxBytesInFlightPerTenant: number;
  historySize: number;
  subscriberWindowBytes: number;
  idleMs: number;
}

/** The request gate and its filters (docs/security.md). */
export interface SecurityConfig {
  gate: {
    /** Empty: the gate is open (admits all, says so at boot and in /health). */
    filters: GateFilterName[];
    failClosed: boolean;
    audit: { sink: AuditSinkKind; topic: string; record: AuditRecordMode };
    token: {
      jwksUrl: string;
      keysFile: string;
      issuer: string;
      audience: string;
      algorithms: TokenAlgorithm[];
      /** `typ` header values accepted, lowercased and without `application/` (RFC 8725 §3.11, RFC 9068 §4). */
      types: string[];
      clockSkewSeconds: number;
      principalClaim: string;
      tenantClaim: string;
      scopesClaim: string;
      jwksCooldownMs: number;
      jwksMaxAgeMs: number;
      cacheMaxEntries: number;
      apiKeyCacheMs: number;
    };
    signature: { toleranceSeconds: number };
    /** `superUsers`: `tenant/principal` names the ACL always allows (the first admin, who writes the first rules). */
    acl: { refreshMs: number; default: AclDefault; superUsers: string[] };
    quota: {
      eventsPerSecond: number;
      bytesPerSecond: number;
      burstSeconds: number;
      streamConnections: number;
      subscriptions: number;
      syncMs: number;
    };
  };
  /** AES-256-GCM keys for secrets at rest, by key id; `activeKey` encrypts, every key decrypts. */
  secrets: { keys: { id: string; key: Buffer }[]; activeKey: string };
  /** Address ranges a webhook sink may resolve to besides public addresses. */
  sinks: { allowedRanges: SinkRange[] };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
    this.name = 'ConfigError';
  }
}

/** Every setting, in the order docs/configuration.md lists them. */
const SETTINGS = {
  instanceId: setting(
    'EVENTMESH_INSTANCE_ID',
    'eventmesh.instance.id',
    instanceId,
    () =>
      hostname()
        .replace(/[^A-Za-z0-9._-]/g, '-')
        .slice(0, 64),
    'Stable name of this runtime instance; its Temporal task queue and its dispatch workflow are named after it.',
    '(host name)',
  ),
  instanceRoles: setting(
    'EVENTMESH_INSTANCE_ROLES',
    'eventmesh.instance.roles',
    listOf(oneOf(INSTANCE_ROLES), INSTANCE_ROLES.join(', ')),
    () => [...INSTANCE_ROLES] as InstanceRole[],
    'What this process runs: the HTTP gateway, the Temporal worker (dispatch), or both.',
  ),
  instanceAdvertisedUrl: setting(
    'EVENTMESH_INSTANCE_ADVERTISED_URL',
    'eventmesh.instance.advertisedUrl',
    optionalHttpUrl,
    () => '',
    "Where the other instances of the runtime reach this one's gateway for the internal stream channel (docs/topologies.md#streams-in-every-topology); an http(s) URL. Unset: http://<listen host>:<bound port>, the host name when the gateway listens on 0.0.0.0 or ::.",
    '(derived from the listen address)',
  ),
  httpHost: setting(
    'EVENTMESH_HTTP_HOST',
    'eventmesh.http.host',
    text,
    () => '127.0.0.1',
    'Address the gateway listens on (a worker-only process: its probes and /metrics).',
  ),
  httpPort: setting(
    'EVENTMESH_HTTP_PORT',
    'eventmesh.http.port',
    integer(0, 65535),
    () => 8080,
    'Port the gateway listens on (a worker-only process: its probes and /metrics).',
  ),
  httpBodyLimitBytes: setting(
    'EVENTMESH_HTTP_BODY_LIMIT_BYTES',
    'eventmesh.http.bodyLimitBytes',
    integer(1024, 64 * 1024 * 1024),
    () => 1024 * 1024,
    'Largest accepted request body; larger bodies get 413.',
  ),
  httpProcesses: setting(
    'EVENTMESH_HTTP_PROCESSES',
    'eventmesh.http.processes',
    integer(1, 64),
    () => 1,
    'Gateway processes sharing the port (Node cluster), one per core to spread HTTP work; more than 1 only with EVENTMESH_INSTANCE_ROLES=gateway.',
  ),
  httpMaxConnections: setting(
    'EVENTMESH_HTTP_MAX_CONNECTIONS',
    'eventmesh.http.maxConnections',
    integer(1, 1000000),
    () => 10000,
    'Most open HTTP connections per gateway process; a request on a connection past it gets 503 OVERLOADED and the connection is closed.',
  ),
  httpMaxPendingRequests: setting(
    'EVENTMESH_HTTP_MAX_PENDING_REQUESTS',
    'eventmesh.http.maxPendingRequests',
    integer(1, 1000000),
    () => 1000,
    'Most request-replies (POST /events/request) a gateway process holds waiting at once; one more gets 503 OVERLOADED.',
  ),
  httpMaxPendingRequestsPerTenant: setting(
    'EVENTMESH_HTTP_MAX_PENDING_REQUESTS_PER_TENANT',
    'eventmesh.http.maxPendingRequestsPerTenant',
    integer(1, 1000000),
    () => 100,
    'Most request-replies one tenant has waiting in a gateway process at once, so one tenant cannot take the whole EVENTMESH_HTTP_MAX_PENDING_REQUESTS; one more gets 429 TOO_MANY_PENDING_REQUESTS (nothing published).',
  ),
  httpRetryAfterSeconds: setting(
    'EVENTMESH_HTTP_RETRY_AFTER_SECONDS',
    'eventmesh.http.retryAfterSeconds',
    integer(1, 3600),
    () => 1,
    'The Retry-After of a 503 for shed work (OVERLOADED, KAFKA_UNAVAILABLE).',
  ),
  httpHeadersTimeoutMs: setting(
    'EVENTMESH_HTTP_HEADERS_TIMEOUT_MS',
    'eventmesh.http.headersTimeoutMs',
    integer(1000, 600000),
    () => 10000,
    "Longest a client may take to send a request's headers (from its first byte, or from the connection for a first request); past it the gateway answers 408 and closes the connection (a slow client holds no connection for long). Checked every second (a quarter of the timeout when shorter). At most EVENTMESH_HTTP_REQUEST_TIMEOUT_MS.",
  ),
  httpRequestTimeoutMs: setting(
    'EVENTMESH_HTTP_REQUEST_TIMEOUT_MS',
    'eventmesh.http.requestTimeoutMs',
    integer(1000, 3600000),
    () => 60000,
    "Longest a client may take to send a whole request, headers and body; past it the gateway answers 408 and closes the connection. It ends once the request is read: an answer the gateway holds (a long-poll's waitMs, a request-reply's timeout, an SSE or WebSocket stream) is never cut by it.",
  ),
  httpKeepAliveTimeoutMs: setting(
    'EVENTMESH_HTTP_KEEP_ALIVE_TIMEOUT_MS',
    'eventmesh.http.keepAliveTimeoutMs',
    integer(1000, 600000),
    () => 72000,
    'How long an idle keep-alive connection (an answer sent, no next request begun) stays open. Longer than the idle timeout of a load balancer in front (60 s on most), so the balancer closes first.',
  ),
  topology: setting(
    'EVENTMESH_DELIVERY_TOPOLOGY',
    'eventmesh.delivery.topology',
    oneOf(DELIVERY_TOPOLOGIES),
    (): DeliveryTopology => 'LOCAL_STICKY_PULL',
    'Delivery topology (docs/topologies.md).',
  ),
  leaseTtlMs: setting(
    'EVENTMESH_DELIVERY_LEASE_TTL_MS',
    'eventmesh.delivery.leaseTtlMs',
    integer(3000, 600000),
    () => 10000,
    'Heartbeat timeout of the poll-and-dispatch activity: how long a silent owner keeps its lease.',
  ),
  maxOwnedPartitions: setting(
    'EVENTMESH_DELIVERY_MAX_OWNED_PARTITIONS',
    'eventmesh.delivery.maxOwnedPartitions',
    integer(1, 100000),
    () => 1000,
    'PARTITION_OWNED_PULL: the partitions one instance runs at once (a Temporal activity and a Kafka connection each); partitions assigned to it beyond these wait unpolled (it logs an error), so at least the partitions served divided by the instances.',
  ),
  webhookTimeoutMs: setting(
    'EVENTMESH_DELIVERY_WEBHOOK_TIMEOUT_MS',
    'eventmesh.delivery.webhookTimeoutMs',
    integer(100, 120000),
    () => 10000,
    'Per-request timeout of a webhook delivery.',
  ),
  webhookOrigin: setting(
    'EVENTMESH_DELIVERY_WEBHOOK_ORIGIN',
    'eventmesh.delivery.webhookOrigin',
    text,
    () => 'eventmesh',
    'The origin this runtime names in the webhook validation handshake (WebHook-Request-Origin).',
  ),
  pollBatchMaxEvents: setting(
    'EVENTMESH_DELIVERY_POLL_BATCH_MAX_EVENTS',
    'eventmesh.delivery.pollBatchMaxEvents',
    integer(1, 100000),
    () => 500,
    'Most events dispatched between two offset commits of one partition.',
  ),
  deliveryConcurrency: setting(
    'EVENTMESH_DELIVERY_CONCURRENCY',
    'eventmesh.delivery.concurrency',
    integer(1, 256),
    () => 16,
    'Deliveries out at once per partition of a webhook subscription with ordering `key` or `none` (its `config.concurrency` overrides it; docs/delivery.md).',
  ),
  retryInitialMs: setting(
    'EVENTMESH_DELIVERY_RETRY_INITIAL_MS',
    'eventmesh.delivery.retryInitialMs',
    integer(10, 600000),
    () => 200,
    'First delay before a failed delivery is retried.',
  ),
  retryMaxMs: setting(
    'EVENTMESH_DELIVERY_RETRY_MAX_MS',
    'eventmesh.delivery.retryMaxMs',
    integer(10, 3600000),
    () => 30000,
    'Longest delay between two retries of a delivery.',
  ),
  maxAttempts: setting(
    'EVENTMESH_DELIVERY_MAX_ATTEMPTS',
    'eventmesh.delivery.maxAttempts',
    integer(1, 1000),
    () => 10,
    'Attempts of a delivery before it goes to the dead-letter queue (a subscription may set its own).',
  ),
  breakerFailureThreshold: setting(
    'EVENTMESH_DELIVERY_BREAKER_FAILURE_THRESHOLD',
    'eventmesh.delivery.breakerFailureThreshold',
    integer(1, 100000),
    () => 5,
    "Consecutive failed attempts to a subscription's sink that open its circuit breaker: its lanes stop fetching and sending, and its parked deliveries wait, until a probe succeeds (docs/delivery.md).",
  ),
  breakerOpenMs: setting(
    'EVENTMESH_DELIVERY_BREAKER_OPEN_MS',
    'eventmesh.delivery.breakerOpenMs',
    integer(100, 3600000),
    () => 1000,
    'How long a breaker stays open before one probe delivery (half-open); doubled after each failed probe.',
  ),
  breakerMaxOpenMs: setting(
    'EVENTMESH_DELIVERY_BREAKER_MAX_OPEN_MS',
    'eventmesh.delivery.breakerMaxOpenMs',
    integer(100, 3600000),
    () => 30000,
    'Longest open period of a breaker between two probes.',
  ),
  retryMaxParked: setting(
    'EVENTMESH_DELIVERY_RETRY_MAX_PARKED',
    'eventmesh.delivery.retryMaxParked',
    integer(1, 10000000),
    () => 10000,
    'Most deliveries of one subscription parked in the retry table; at the cap a failing event stays at the head of its lane and the offset waits (docs/delivery.md).',
  ),
  skipWarningMs: setting(
    'EVENTMESH_DELIVERY_SKIP_WARNING_MS',
    'eventmesh.delivery.skipWarningMs',
    integer(60000, 365 * 24 * 3600 * 1000),
    () => 7 * 24 * 3600 * 1000,
    'How long /health warns about events Kafka retention deleted before a subscription got them, after the last such skip.',
  ),
  orphanGraceMs: setting(
    'EVENTMESH_DELIVERY_ORPHAN_GRACE_MS',
    'eventmesh.delivery.orphanGraceMs',
    integer(6000, 86400000),
    () => 180000,
    "LOCAL_STICKY_PULL: how long an instance's dispatch run may go unrenewed before its subscriptions count as orphaned (at least twice EVENTMESH_DELIVERY_LEASE_TTL_MS).",
    '180000 (or twice the lease TTL, if more)',
  ),
  orphanTakeover: setting(
    'EVENTMESH_DELIVERY_ORPHAN_TAKEOVER',
    'eventmesh.delivery.orphanTakeover',
    oneOf(ORPHAN_TAKEOVERS),
    (): OrphanTakeoverMode => 'AUTOMATIC',
    'LOCAL_STICKY_PULL: AUTOMATIC, live instances take orphaned subscriptions over; MANUAL, orphans are only reported and moved by POST /admin/subscriptions/{id}/move.',
  ),
  deadLetterRetentionDays: setting(
    'EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS',
    'eventmesh.delivery.deadLetterRetentionDays',
    integer(0, 3650),
    () => 30,
    'Days a dead letter (and an A2A push dead letter) is kept; the Temporal schedule `dlq-retention` deletes older ones every ten minutes, in small batches (the last instance to boot sets the days). 0 keeps them until their subscription (or task) is deleted (and removes the schedule).',
  ),
  deadLetterReplayRate: setting(
    'EVENTMESH_DELIVERY_DEAD_LETTER_REPLAY_RATE',
    'eventmesh.delivery.deadLetterReplayRate',
    integer(1, 1000),
    () => 50,
    'Events per second a dead-letter replay sends to its subscription when the request names no `ratePerSecond` (a request may ask for 1 to 1000; docs/operations.md).',
  ),
  filterMaxAttributeChars: setting(
    'EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS',
    'eventmesh.filter.maxAttributeChars',
    integer(256, 1048576),
    () => CESQL_DEFAULT_MAX_ATTRIBUTE_CHARS,
    "Longest string a subscription's CESQL (`sql`) filter works on in the dispatch loop; an event whose attribute it reads is longer does not match that filter (libs/filter/README.md). A stream client's own `filter` uses the default.",
  ),
  pgHost: setting('EVENTMESH_POSTGRES_HOST', 'eventmesh.postgres.host', text, () => '127.0.0.1', 'Postgres host.'),
  pgPort: setting(
    'EVENTMESH_POSTGRES_PORT',
    'eventmesh.postgres.port',
    integer(1, 65535),
    () => 5432,
    'Postgres port.',
  ),
  pgUser: setting('EVENTMESH_POSTGRES_USER', 'eventmesh.postgres.user', text, () => 'eventmesh', 'Postgres user.'),
  pgPassword: setting(
    'EVENTMESH_POSTGRES_PASSWORD',
    'eventmesh.postgres.password',
    text,
    () => 'eventmesh',
    'Postgres password.',
  ),
  pgDatabase: setting(
    'EVENTMESH_POSTGRES_DATABASE',
    'eventmesh.postgres.database',
    text,
    () => 'eventmesh',
    'Postgres database.',
  ),
  pgPoolSize: setting(
    'EVENTMESH_POSTGRES_POOL_SIZE',
    'eventmesh.postgres.poolSize',
    integer(1, 200),
    () => 10,
    'Connections in the Postgres pool.',
  ),
  pgDispatchPoolSize: setting(
    'EVENTMESH_POSTGRES_DISPATCH_POOL_SIZE',
    'eventmesh.postgres.dispatchPoolSize',
    integer(1, 200),
    () => 5,
    "Connections in the dispatch loops' own Postgres pool (their claims and renewals, fenced writes, refreshes and retry sweeps), apart from EVENTMESH_POSTGRES_POOL_SIZE's pool, which serves everything else (the gateway, A2A tasks, dead-letter replays, presence, takeovers): a busy or stranded main pool cannot starve delivery.",
  ),
  pgQueryTimeoutMs: setting(
    'EVENTMESH_POSTGRES_QUERY_TIMEOUT_MS',
    'eventmesh.postgres.queryTimeoutMs',
    integer(1000, 3600000),
    () => 30000,
    'Longest a statement may run: the server ends it (statement_timeout, and idle_in_transaction_session_timeout for an open transaction), and a client that has heard nothing 1 s later drops the connection as dead (a half-open link). At least twice EVENTMESH_DELIVERY_LEASE_TTL_MS: a lease or dispatch-run transaction bounds each of its statements to a lease TTL. Migrations (npm run migrate) run without it.',
    '30000 (or twice the lease TTL, if more)',
  ),
  pgLeakDetectionThresholdMs: setting(
    'EVENTMESH_POSTGRES_LEAK_DETECTION_THRESHOLD_MS',
    'eventmesh.postgres.leakDetectionThresholdMs',
    integer(0, 3600000),
    () => 0,
    "Pool checkout leak detection (as HikariCP's leakDetectionThreshold): a connection checked out of the pool for longer than this is logged as a warning with the stack of the code that took it and the statement it has in flight, and counted (eventmesh_postgres_pool_leaks_total). The stack is captured at every checkout, so it costs a little on each. 0: off.",
  ),
  kafkaBrokers: setting(
    'EVENTMESH_KAFKA_BROKERS',
    'eventmesh.kafka.brokers',
    listOf(hostPort, 'host:port'),
    () => ['127.0.0.1:9092'],
    'Kafka bootstrap brokers.',
  ),
  kafkaClientId: setting(
    'EVENTMESH_KAFKA_CLIENT_ID',
    'eventmesh.kafka.clientId',
    text,
    () => 'eventmesh',
    'Kafka client id prefix.',
  ),
  kafkaTopics: setting(
    'EVENTMESH_KAFKA_TOPICS',
    'eventmesh.kafka.topics',
    listOf(topicName, 'topic names'),
    () => ['events'],
    'Topics the runtime serves; they are created at boot when missing. Others get 404.',
  ),
  kafkaTopicPartitions: setting(
    'EVENTMESH_KAFKA_TOPIC_PARTITIONS',
    'eventmesh.kafka.topicPartitions',
    integer(1, 10000),
    () => 6,
    'Partitions of a topic the runtime creates.',
  ),
  kafkaTenantTopicsMax: setting(
    'EVENTMESH_KAFKA_TENANT_TOPICS_MAX',
    'eventmesh.kafka.tenantTopicsMax',
    integer(0, 100000),
    () => 100,
    "Most topics of its own one tenant may create (POST /topics); one more is 409 TOPIC_LIMIT_REACHED, nothing created. 0: tenants create none. The operator's shared topics (EVENTMESH_KAFKA_TOPICS) do not count.",
  ),
  kafkaTenantTopicMaxPartitions: setting(
    'EVENTMESH_KAFKA_TENANT_TOPIC_MAX_PARTITIONS',
    'eventmesh.kafka.tenantTopicMaxPartitions',
    integer(1, 10000),
    () => 64,
    'Most partitions a tenant may give one of its own topics (POST /topics); more is 400, nothing created.',
  ),
  kafkaSharedTopicAccess: setting(
    'EVENTMESH_KAFKA_SHARED_TOPIC_ACCESS',
    'eventmesh.kafka.sharedTopicAccess',
    oneOf(SHARED_TOPIC_ACCESS),
    (): SharedTopicAccess => 'OPEN',
    "Who publishes to and subscribes to the shared topics (EVENTMESH_KAFKA_TOPICS): OPEN, every tenant; GRANTED, the operator tenant, and another tenant only with the operator's grant for that topic and action (POST /admin/topics/{topic}/grants), else 403 FORBIDDEN reason no_grant.",
  ),
  kafkaReplicationFactor: setting(
    'EVENTMESH_KAFKA_REPLICATION_FACTOR',
    'eventmesh.kafka.replicationFactor',
    integer(1, 32),
    () => 1,
    'Replication factor of a topic the runtime creates.',
  ),
  kafkaConnectTimeoutMs: setting(
    'EVENTMESH_KAFKA_CONNECT_TIMEOUT_MS',
    'eventmesh.kafka.connectTimeoutMs',
    integer(100, 120000),
    () => 5000,
    'How long boot waits for Kafka before it gives up.',
  ),
  kafkaProduceLingerMs: setting(
    'EVENTMESH_KAFKA_PRODUCE_LINGER_MS',
    'eventmesh.kafka.produceLingerMs',
    integer(0, 1000),
    () => 1,
    'Longest wait of a publish for others to share its produce request (while one is in flight, they queue anyway).',
  ),
  kafkaProduceMaxBatchEvents: setting(
    'EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS',
    'eventmesh.kafka.produceMaxBatchEvents',
    integer(1, 100000),
    () => 500,
    'Most events in one produce request.',
  ),
  kafkaProduceMaxInFlight: setting(
    'EVENTMESH_KAFKA_PRODUCE_MAX_IN_FLIGHT',
    'eventmesh.kafka.produceMaxInFlight',
    integer(1, 64),
    () => 4,
    'Most produce requests awaiting their acknowledgement at once.',
  ),
  kafkaProduceQueueMaxEvents: setting(
    'EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_EVENTS',
    'eventmesh.kafka.produceQueueMaxEvents',
    integer(1, 10000000),
    () => 20000,
    'Most events a gateway process holds for Kafka (queued or in flight); a publish past it gets 503 OVERLOADED at once. At least EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS.',
  ),
  kafkaProduceQueueMaxBytes: setting(
    'EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_BYTES',
    'eventmesh.kafka.produceQueueMaxBytes',
    integer(1024, 4 * 1024 * 1024 * 1024),
    () => 64 * 1024 * 1024,
    'Most bytes (keys, values, headers) a gateway process holds for Kafka; a publish past it gets 503 OVERLOADED at once. At least EVENTMESH_HTTP_BODY_LIMIT_BYTES.',
  ),
  kafkaPublishTimeoutMs: setting(
    'EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS',
    'eventmesh.kafka.publishTimeoutMs',
    integer(100, 120000),
    () => 5000,
    'Longest a publish waits for Kafka to acknowledge its events; then 503 KAFKA_UNAVAILABLE (never 202).',
  ),
  kafkaRequestTimeoutMs: setting(
    'EVENTMESH_KAFKA_REQUEST_TIMEOUT_MS',
    'eventmesh.kafka.requestTimeoutMs',
    integer(1000, 300000),
    () => 10000,
    'Longest the Kafka client waits for the answer to one request (and a broker for the replicas of a produce) before it retries; a connection that answered nothing for that long and a second more after a request is dropped and a new one opened (a link gone silent).',
  ),
  agentsCallTimeoutMs: setting(
    'EVENTMESH_AGENTS_CALL_TIMEOUT_MS',
    'eventmesh.agents.callTimeoutMs',
    integer(100, 600000),
    () => 30000,
    "Deadline of one call of the A2A broker to an agent (a send, a GetTask while it follows the agent's task, a cancel; docs/a2a.md). A call past it is tried again, within the task's timeout.",
  ),
  agentsTaskTimeoutMs: setting(
    'EVENTMESH_AGENTS_TASK_TIMEOUT_MS',
    'eventmesh.agents.taskTimeoutMs',
    integer(1000, 7 * 24 * 3600 * 1000),
    () => 600000,
    'How long an A2A task may take, from the send to a settled state (terminal, or waiting for the client); then it fails and the agent is asked to cancel it. A task for an agent that is down waits for it this long.',
  ),
  agentsSendWaitMs: setting(
    'EVENTMESH_AGENTS_SEND_WAIT_MS',
    'eventmesh.agents.sendWaitMs',
    integer(100, 600000),
    () => 30000,
    'How long a blocking SendMessage waits for its task to settle; then it answers the task as it is (it runs on).',
  ),
  agentsHeartbeatTtlMs: setting(
    'EVENTMESH_AGENTS_HEARTBEAT_TTL_MS',
    'eventmesh.agents.heartbeatTtlMs',
    integer(1000, 86400000),
    () => 60000,
    "How long a mesh-subscriber agent's card lives after its last heartbeat (POST /a2a/agents/{name}/heartbeat, or its registration); then it is not listed, its card is not served and it is sent no task until it beats again.",
  ),
  agentsMaxStreams: setting(
    'EVENTMESH_AGENTS_MAX_STREAMS',
    'eventmesh.agents.maxStreams',
    integer(1, 100000),
    () => 1000,
    'Most A2A SSE streams (SendStreamingMessage, SubscribeToTask, their v0.3 and REST forms) a gateway process holds open at once; one more is refused 503 OVERLOADED with Retry-After.',
  ),
  agentsStreamPollMs: setting(
    'EVENTMESH_AGENTS_STREAM_POLL_MS',
    'eventmesh.agents.streamPollMs',
    integer(10, 10000),
    () => 200,
    'How often a gateway process looks at the event logs of the A2A tasks its open streams wait on (one query for all of them); an event reaches a waiting stream within about this long.',
  ),
  agentsStreamHeartbeatMs: setting(
    'EVENTMESH_AGENTS_STREAM_HEARTBEAT_MS',
    'eventmesh.agents.streamHeartbeatMs',
    integer(100, 300000),
    () => 15000,
    'An A2A SSE stream that wrote nothing for this long gets an SSE comment (`: keep-alive`), so proxies and clients keep an idle stream open.',
  ),
  agentsPushSigningSecret: setting(
    'EVENTMESH_AGENTS_PUSH_SIGNING_SECRET',
    'eventmesh.agents.pushSigningSecret',
    optionalWebhookSecret,
    () => '',
    "The Standard Webhooks secret (whsec_...) A2A push notifications are signed with (webhook-id, webhook-timestamp, webhook-signature; docs/a2a.md): the clients' webhooks verify them with it. Unset: pushes go unsigned (the config's token or authentication still authenticates them).",
  ),
  agentsTaskRetentionDays: setting(
    'EVENTMESH_AGENTS_TASK_RETENTION_DAYS',
    'eventmesh.agents.taskRetentionDays',
    integer(0, 3650),
    () => 30,
    'Days an A2A task that ended (completed, failed, canceled, rejected) or waits for its client (input-required, auth-required) is kept after its last change, with its event log, push configs and push dead letters; the Temporal schedule `a2a-task-retention` deletes older ones every ten minutes, in small batches (the last instance to boot sets the days). A running task is kept. 0 keeps them all (and removes the schedule).',
  ),
  agentsMaxAnswerBytes: setting(
    'EVENTMESH_AGENTS_MAX_ANSWER_BYTES',
    'eventmesh.agents.maxAnswerBytes',
    integer(1024, 1024 * 1024 * 1024),
    () => 16 * 1024 * 1024,
    'Largest answer the A2A broker reads from an agent: a JSON answer whole, or one event of an event stream. Past it the read is aborted and the task fails, its status message saying the answer was too large (an agent sent the same turn again would answer the same).',
  ),
  agentsMaxPerTenant: setting(
    'EVENTMESH_AGENTS_MAX_PER_TENANT',
    'eventmesh.agents.maxPerTenant',
    integer(1, 100000),
    () => 100,
    "Most A2A agents one tenant may register (each has two Kafka topics: its requests and its task events); one more is 409 AGENT_LIMIT_REACHED, nothing created. Replacing a registered agent's card always passes. Registrations at once on several instances may pass it by a few.",
  ),
  agentsWorkerSlots: setting(
    'EVENTMESH_AGENTS_WORKER_SLOTS',
    'eventmesh.agents.workerSlots',
    integer(2, 10000),
    () => 200,
    "Most A2A task workflow tasks an instance's worker runs at once, and as many local activities. A task's first workflow task holds its slot while the task's first delivery attempt runs (docs/a2a.md); while every slot is taken, a new task's workflow starts through the task queue instead of eagerly on the instance that took it, a slower start that costs the Temporal server more.",
  ),
  streamsPollMaxConsumers: setting(
    'EVENTMESH_STREAMS_POLL_MAX_CONSUMERS',
    'eventmesh.streams.pollMaxConsumers',
    integer(1, 100000),
    () => 100,
    'Most long-poll consumer names one subscription has connected at once (a name is held until it has not polled for a minute, or until a delivery queued for it passes the ack timeout with no poll since); a new name past it gets 429 TOO_MANY_CONSUMERS.',
  ),
  sessionsWindowBytes: setting(
    'EVENTMESH_SESSIONS_WINDOW_BYTES',
    'eventmesh.sessions.windowBytes',
    integer(1024, 64 * 1024 * 1024),
    () => 256 * 1024,
    "A streaming session's credit window when the client names none: the most bytes of its chunks on the way between the agent and the reader (docs/streaming-sessions.md#flow-control). At least EVENTMESH_SESSIONS_MAX_CHUNK_BYTES.",
  ),
  sessionsMaxWindowBytes: setting(
    'EVENTMESH_SESSIONS_MAX_WINDOW_BYTES',
    'eventmesh.sessions.maxWindowBytes',
    integer(1024, 1024 * 1024 * 1024),
    () => 4 * 1024 * 1024,
    'The largest credit window a client may ask for; a larger one is cut to it.',
  ),
  sessionsMaxChunkBytes: setting(
    'EVENTMESH_SESSIONS_MAX_CHUNK_BYTES',
    'eventmesh.sessions.maxChunkBytes',
    integer(16, 16 * 1024 * 1024),
    () => 64 * 1024,
    'The largest chunk (and Mode 2 publication) of a streaming session; a window is never smaller. A larger chunk ends the session (FLOW_CONTROL_VIOLATION); the SDK refuses it before sending.',
  ),
  sessionsMaxRequestBytes: setting(
    'EVENTMESH_SESSIONS_MAX_REQUEST_BYTES',
    'eventmesh.sessions.maxRequestBytes',
    integer(1024, 64 * 1024 * 1024),
    () => 1024 * 1024,
    "The largest request of a streaming call; also bounds every frame a client sends (the WebSocket's largest message).",
  ),
  sessionsOpenTimeoutMs: setting(
    'EVENTMESH_SESSIONS_OPEN_TIMEOUT_MS',
    'eventmesh.sessions.openTimeoutMs',
    integer(100, 600000),
    () => 10000,
    "How long a session's open waits for the instance holding the chosen agent replica to answer; then the open fails (AGENT_GONE).",
  ),
  sessionsMaxWaitMs: setting(
    'EVENTMESH_SESSIONS_MAX_WAIT_MS',
    'eventmesh.sessions.maxWaitMs',
    integer(0, 3600000),
    () => 60000,
    'The longest an open may ask to wait for a replica of its agent to connect (waitMs); with none it fails at once (SESSION_AGENT_NOT_FOUND).',
  ),
  sessionsHeartbeatMs: setting(
    'EVENTMESH_SESSIONS_HEARTBEAT_MS',
    'eventmesh.sessions.heartbeatMs',
    integer(100, 600000),
    () => 5000,
    "How often a sessions connection (a client's, an agent replica's, a link between instances) is pinged; one silent for two periods is closed and its sessions end with a typed error.",
  ),
  sessionsMaxPerTenant: setting(
    'EVENTMESH_SESSIONS_MAX_PER_TENANT',
    'eventmesh.sessions.maxPerTenant',
    integer(1, 10000000),
    () => 100000,
    "Most streaming sessions one tenant's clients hold open across the runtime (Mode 1 sessions, Mode 2 publishers and subscriptions); one more is refused 429 QUOTA_EXCEEDED. Each gateway process counts its own and reads the others' every second: opens through several processes within that second may pass it together (docs/streaming-sessions.md#security).",
  ),
  sessionsMaxAgentsPerTenant: setting(
    'EVENTMESH_SESSIONS_MAX_AGENTS_PER_TENANT',
    'eventmesh.sessions.maxAgentsPerTenant',
    integer(1, 1000000),
    () => 1000,
    'Most session agent replicas (a connection serving an agent name) one tenant has connected across the runtime; one more serve is refused 429 QUOTA_EXCEEDED. Counted as the sessions are.',
  ),
  sessionsMaxBytesInFlightPerTenant: setting(
    'EVENTMESH_SESSIONS_MAX_BYTES_IN_FLIGHT_PER_TENANT',
    'eventmesh.sessions.maxBytesInFlightPerTenant',
    integer(1024, Number.MAX_SAFE_INTEGER),
    () => 1024 * 1024 * 1024,
    "Most bytes one tenant's sessions may have on the way across the runtime: the sum of their windows, charged when a session opens (the runtime never holds more of a session than its window), so an open past it is refused 429 QUOTA_EXCEEDED.",
  ),
  sessionsHistorySize: setting(
    'EVENTMESH_SESSIONS_HISTORY_SIZE',
    'eventmesh.sessions.historySize',
    integer(0, 100000),
    () => 100,
    "How many of a Mode 2 session's latest publications its home instance keeps in memory, from which a subscriber that reconnects resumes after its last position (else it is told it missed some).",
  ),
  sessionsSubscriberWindowBytes: setting(
    'EVENTMESH_SESSIONS_SUBSCRIBER_WINDOW_BYTES',
    'eventmesh.sessions.subscriberWindowBytes',
    integer(1024, 1024 * 1024 * 1024),
    () => 1024 * 1024,
    "A Mode 2 subscriber's window when it names none: the most bytes of publications it may have unread; one that falls further behind is dropped (SLOW_SUBSCRIBER).",
  ),
  sessionsIdleMs: setting(
    'EVENTMESH_SESSIONS_IDLE_MS',
    'eventmesh.sessions.idleMs',
    integer(1000, 86400000),
    () => 300000,
    'A Mode 2 session with no publication for this long ends: its subscribers are told (SESSION_ENDED) and its history is dropped.',
  ),
  temporalAddress: setting(
    'EVENTMESH_TEMPORAL_ADDRESS',
    'eventmesh.temporal.address',
    hostPort,
    () => '127.0.0.1:7233',
    'Temporal frontend address.',
  ),
  temporalNamespace: setting(
    'EVENTMESH_TEMPORAL_NAMESPACE',
    'eventmesh.temporal.namespace',
    text,
    () => 'default',
    'Temporal namespace.',
  ),
  temporalUiUrl: setting(
    'EVENTMESH_TEMPORAL_UI_URL',
    'eventmesh.temporal.uiUrl',
    httpUrl,
    () => 'http://127.0.0.1:8233',
    'Temporal Web UI, printed at boot and linked from /health.',
  ),
  temporalConnectTimeoutMs: setting(
    'EVENTMESH_TEMPORAL_CONNECT_TIMEOUT_MS',
    'eventmesh.temporal.connectTimeoutMs',
    integer(100, 120000),
    () => 5000,
    'How long boot waits for Temporal before it gives up.',
  ),
  logLevel: setting(
    'EVENTMESH_LOG_LEVEL',
    'eventmesh.log.level',
    oneOf(LOG_LEVELS),
    (): LogLevel => 'info',
    'Log level.',
  ),
  logFormat: setting(
    'EVENTMESH_LOG_FORMAT',
    'eventmesh.log.format',
    oneOf(LOG_FORMATS),
    (): LogFormat => 'auto',
    'How log lines are written: json (one JSON object per line), pretty (human-readable, pino-pretty), or auto: pretty when standard output is a terminal, else json.',
  ),
  logAccess: setting(
    'EVENTMESH_LOG_ACCESS',
    'eventmesh.log.access',
    oneOf(ACCESS_LOGS),
    (): AccessLogMode => 'all',
    'Which HTTP requests get an access log line (method, path without the query, status, duration, request id; at level info, 5xx at error): all, errors (answered 4xx or 5xx), or off.',
  ),
  logSinkFailureSummaryMs: setting(
    'EVENTMESH_LOG_SINK_FAILURE_SUMMARY_MS',
    'eventmesh.log.sinkFailureSummaryMs',
    integer(1000, 3600000),
    () => 60000,
    "A sink's first failed delivery is logged in full; its further failures within this period are counted and logged as one summary line per period.",
  ),
  tracingEnabled: setting(
    'EVENTMESH_TRACING_ENABLED',
    'eventmesh.tracing.enabled',
    bool,
    () => false,
    "true: OpenTelemetry spans for each publish request and each delivery attempt, and the Temporal SDK's tracing interceptors on the client and the workers (docs/operations.md#tracing). false: no spans; a publisher's `traceparent` still travels with its events to their sinks unchanged.",
  ),
  tracingOtlpEndpoint: setting(
    'EVENTMESH_TRACING_OTLP_ENDPOINT',
    'eventmesh.tracing.otlpEndpoint',
    optionalHttpUrl,
    () => '',
    "Base URL of an OTLP/HTTP collector (e.g. http://127.0.0.1:4318): spans are sent, batched, to <url>/v1/traces as OTLP JSON. Unset: nothing is exported, and the publish and delivery spans are not recorded; their context (a span id of their own, the sampler's decision) still travels with the events and webhooks. Used only while EVENTMESH_TRACING_ENABLED=true.",
    '(none: not exported)',
  ),
  tracingServiceName: setting(
    'EVENTMESH_TRACING_SERVICE_NAME',
    'eventmesh.tracing.serviceName',
    text,
    () => 'eventmesh',
    "The `service.name` resource attribute of this instance's spans (the instance id is `service.instance.id`).",
  ),
  tracingSampleRatio: setting(
    'EVENTMESH_TRACING_SAMPLE_RATIO',
    'eventmesh.tracing.sampleRatio',
    decimal(0, 1),
    () => 1,
    "Share of new traces sampled (0 to 1). A publish or delivery that continues a caller's trace follows that trace's sampled flag instead (parent-based).",
  ),
  metricsEnabled: setting(
    'EVENTMESH_METRICS_ENABLED',
    'eventmesh.metrics.enabled',
    bool,
    () => true,
    "Serve GET /metrics (Prometheus text format) and record the runtime's metrics; false records nothing and /metrics answers 404 (docs/operations.md#metrics).",
  ),
  metricsAdminGate: setting(
    'EVENTMESH_METRICS_ADMIN_GATE',
    'eventmesh.metrics.adminGate',
    bool,
    () => false,
    "true: GET /metrics passes the admin API's gate (an operator-tenant admin, like the runtime-wide admin routes). false: it is public, as /health is (scrape it on a network only Prometheus reaches).",
  ),
  metricsScrapeSecret: setting(
    'EVENTMESH_METRICS_SCRAPE_SECRET',
    'eventmesh.metrics.scrapeSecret',
    scrapeSecret,
    () => '',
    "A credential for GET /metrics alone (Prometheus's `authorization: { credentials: ... }`): set, a scrape must send Authorization: Bearer <it> (401 otherwise); it opens nothing else, and an admin token does not replace it. Not with EVENTMESH_METRICS_ADMIN_GATE=true.",
    '(none)',
  ),
  metricsSubscriptionLabels: setting(
    'EVENTMESH_METRICS_SUBSCRIPTION_LABELS',
    'eventmesh.metrics.subscriptionLabels',
    bool,
    () => false,
    "true: /metrics shows the series labelled with subscription ids (eventmesh_delivery_lag_events, eventmesh_delivery_circuit_state) while a gate is on. false: they are left out while either gate is on (a subscription id is a tenant's), and shown while both are open.",
  ),
  metricsTemporalAddress: setting(
    'EVENTMESH_METRICS_TEMPORAL_ADDRESS',
    'eventmesh.metrics.temporalAddress',
    (raw: string): string => (raw === 'off' ? 'off' : hostPort(raw)),
    () => '',
    "Where the Temporal SDK core's Prometheus exporter (the worker's own metrics) listens, as host:port; its series are merged into GET /metrics. Unset: a free loopback port chosen at boot. off: no Temporal worker metrics.",
    '(a free loopback port)',
  ),
  healthCheckCacheMs: setting(
    'EVENTMESH_HEALTH_CHECK_CACHE_MS',
    'eventmesh.health.checkCacheMs',
    integer(0, 60000),
    () => 2000,
    'How long /health and /health/ready reuse one round of dependency checks (Postgres, Kafka, Temporal); calls within it, and calls while a round runs, share that round. 0: every call checks (still one round at a time).',
  ),
  healthDispatchStaleMs: setting(
    'EVENTMESH_HEALTH_DISPATCH_STALE_MS',
    'eventmesh.health.dispatchStaleMs',
    integer(1000, 3600000),
    () => 30000,
    '/health/ready is not ready while a dispatch loop of this instance has not completed a round for this long (a loop stuck on a write or a fetch).',
  ),
  gateFilters: setting(
    'EVENTMESH_SECURITY_GATE_FILTERS',
    'eventmesh.security.gate.filters',
    listOf(oneOf(GATE_FILTERS), GATE_FILTERS.join(', ')),
    (): GateFilterName[] => [],
    'Filters of the request gate, run in the order token, signature, acl, quota whatever order they are listed in. Unset: the gate is open (admits all; the boot log and /health say so).',
    '(none: open)',
  ),
  gateFailClosed: setting(
    'EVENTMESH_SECURITY_GATE_FAIL_CLOSED',
    'eventmesh.security.gate.failClosed',
    bool,
    () => false,
    'true: a failed filter answers 401/403/429 and nothing is written (needs EVENTMESH_ADMIN_SECURITY_FILTERS). false: every filter runs, its verdict is audited and counted, and a data-path request proceeds (report-only rollout); admin routes still want an authenticated caller.',
  ),
  gateAuditSink: setting(
    'EVENTMESH_SECURITY_GATE_AUDIT_SINK',
    'eventmesh.security.gate.audit.sink',
    oneOf(AUDIT_SINKS),
    (): AuditSinkKind => 'LOG',
    'Where gate decisions are recorded: LOG (structured log lines) or CLOUDEVENTS (one CloudEvent per decision, published to the audit topic).',
  ),
  gateAuditTopic: setting(
    'EVENTMESH_SECURITY_GATE_AUDIT_TOPIC',
    'eventmesh.security.gate.audit.topic',
    topicName,
    () => '',
    'The topic audit CloudEvents are published to (CLOUDEVENTS sink); one of EVENTMESH_KAFKA_TOPICS.',
    '(none)',
  ),
  gateAuditRecord: setting(
    'EVENTMESH_SECURITY_GATE_AUDIT_RECORD',
    'eventmesh.security.gate.audit.record',
    oneOf(AUDIT_RECORDS),
    (): AuditRecordMode => 'DENIALS',
    'Which decisions of the ingress gate are audited: DENIALS (refusals, and what report-only mode would have refused), or ALL (every allowed request too: a record per publish). The admin gate audits every decision.',
  ),
  tokenJwksUrl: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_JWKS_URL',
    'eventmesh.security.gate.token.jwksUrl',
    optionalHttpUrl,
    () => '',
    'JWK Set URL of the token issuer; keys are cached and refetched on an unknown kid (at most once per cooldown).',
    '(none)',
  ),
  tokenKeysFile: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE',
    'eventmesh.security.gate.token.keysFile',
    text,
    () => '',
    'A file holding a JWK Set of trusted public keys (instead of, or besides, the JWKS URL).',
    '(none)',
  ),
  tokenIssuer: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_ISSUER',
    'eventmesh.security.gate.token.issuer',
    text,
    () => '',
    'The `iss` a token must carry; required when a JWKS URL or keys file is set.',
    '(none)',
  ),
  tokenAudience: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE',
    'eventmesh.security.gate.token.audience',
    text,
    () => '',
    'The `aud` a token must carry; required when a JWKS URL or keys file is set.',
    '(none)',
  ),
  tokenAlgorithms: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_ALGORITHMS',
    'eventmesh.security.gate.token.algorithms',
    listOf(oneOf(TOKEN_ALGORITHMS), TOKEN_ALGORITHMS.join(', ')),
    (): TokenAlgorithm[] => ['RS256', 'PS256', 'ES256', 'EdDSA'],
    'JWS algorithms a token may use (asymmetric only: never none, never HMAC).',
  ),
  tokenTypes: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_TYPES',
    'eventmesh.security.gate.token.types',
    listOf(tokenType, 'JWT types (typ) such as at+jwt or JWT'),
    (): string[] => ['at+jwt', 'jwt'],
    'The `typ` header values a token may carry (RFC 8725, RFC 9068), compared case-insensitively and with or without `application/`; a token without `typ`, or with another (an ID token, a logout token), is refused.',
    'at+jwt,JWT',
  ),
  tokenClockSkewSeconds: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_CLOCK_SKEW_SECONDS',
    'eventmesh.security.gate.token.clockSkewSeconds',
    integer(0, 300),
    () => 30,
    'Clock skew tolerated on exp and nbf.',
  ),
  tokenPrincipalClaim: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_PRINCIPAL_CLAIM',
    'eventmesh.security.gate.token.principalClaim',
    claimName,
    () => 'sub',
    'The claim naming the caller.',
  ),
  tokenTenantClaim: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_TENANT_CLAIM',
    'eventmesh.security.gate.token.tenantClaim',
    claimName,
    () => 'tenant',
    "The claim naming the caller's tenant; a token without it is refused.",
  ),
  tokenScopesClaim: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_SCOPES_CLAIM',
    'eventmesh.security.gate.token.scopesClaim',
    claimName,
    () => 'scope',
    "The claim listing the caller's scopes (publish, subscribe, admin): a space-separated string or an array.",
  ),
  tokenJwksCooldownMs: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_JWKS_COOLDOWN_MS',
    'eventmesh.security.gate.token.jwksCooldownMs',
    integer(1000, 3600000),
    () => 30000,
    'Least time between two JWKS fetches (an unknown kid waits for it).',
  ),
  tokenJwksMaxAgeMs: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_JWKS_MAX_AGE_MS',
    'eventmesh.security.gate.token.jwksMaxAgeMs',
    integer(1000, 86400000),
    () => 600000,
    'How long fetched JWKS keys are used before they are fetched again.',
  ),
  tokenCacheMaxEntries: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_CACHE_MAX_ENTRIES',
    'eventmesh.security.gate.token.cacheMaxEntries',
    integer(0, 10000000),
    () => 10000,
    'Verified tokens remembered until they expire, so a repeated token is not verified again; 0 turns the cache off.',
  ),
  apiKeyCacheMs: setting(
    'EVENTMESH_SECURITY_GATE_TOKEN_API_KEY_CACHE_MS',
    'eventmesh.security.gate.token.apiKeyCacheMs',
    integer(0, 60000),
    () => 5000,
    'How long a verified API key is trusted before it is read again: a revocation takes effect on every instance within it.',
  ),
  signatureToleranceSeconds: setting(
    'EVENTMESH_SECURITY_GATE_SIGNATURE_TOLERANCE_SECONDS',
    'eventmesh.security.gate.signature.toleranceSeconds',
    integer(10, 3600),
    () => 300,
    "How far a signed publish's webhook-timestamp may be from now; a webhook-id seen within it is a replay.",
  ),
  aclRefreshMs: setting(
    'EVENTMESH_SECURITY_GATE_ACL_REFRESH_MS',
    'eventmesh.security.gate.acl.refreshMs',
    integer(100, 60000),
    () => 1000,
    'How often an instance looks for changed ACL rules and quotas.',
  ),
  aclDefault: setting(
    'EVENTMESH_SECURITY_GATE_ACL_DEFAULT',
    'eventmesh.security.gate.acl.default',
    oneOf(ACL_DEFAULTS),
    (): AclDefault => 'DENY',
    'The verdict when no ACL rule matches.',
  ),
  aclSuperUsers: setting(
    'EVENTMESH_SECURITY_GATE_ACL_SUPER_USERS',
    'eventmesh.security.gate.acl.superUsers',
    (raw: string): string[] => (raw === 'none' ? [] : listOf(superUser, 'tenant/principal')(raw)),
    (): string[] => [],
    'Authenticated callers (tenant/principal, comma-separated) the ACL always allows, on both gates: the operator who writes the first rules while the default is DENY. Their requests are still authenticated, audited and counted against quotas.',
    '(none)',
  ),
  quotaEventsPerSecond: setting(
    'EVENTMESH_SECURITY_GATE_QUOTA_EVENTS_PER_SECOND',
    'eventmesh.security.gate.quota.eventsPerSecond',
    integer(1, 100000000),
    () => 1000,
    "A tenant's published events per second, runtime-wide (a tenant's own quota overrides it).",
  ),
  quotaBytesPerSecond: setting(
    'EVENTMESH_SECURITY_GATE_QUOTA_BYTES_PER_SECOND',
    'eventmesh.security.gate.quota.bytesPerSecond',
    integer(1024, 100 * 1024 * 1024 * 1024),
    () => 10 * 1024 * 1024,
    "A tenant's published bytes per second, runtime-wide.",
  ),
  quotaBurstSeconds: setting(
    'EVENTMESH_SECURITY_GATE_QUOTA_BURST_SECONDS',
    'eventmesh.security.gate.quota.burstSeconds',
    integer(1, 60),
    () => 2,
    'Burst allowance: a tenant idle for this long may publish this many seconds of its rate at once.',
  ),
  quotaStreamConnections: setting(
    'EVENTMESH_SECURITY_GATE_QUOTA_STREAM_CONNECTIONS',
    'eventmesh.security.gate.quota.streamConnections',
    integer(1, 10000000),
    () => 100,
    "A tenant's open stream connections (WebSocket, SSE, long-poll), runtime-wide.",
  ),
  quotaSubscriptions: setting(
    'EVENTMESH_SECURITY_GATE_QUOTA_SUBSCRIPTIONS',
    'eventmesh.security.gate.quota.subscriptions',
    integer(1, 10000000),
    () => 1000,
    "A tenant's subscriptions.",
  ),
  quotaSyncMs: setting(
    'EVENTMESH_SECURITY_GATE_QUOTA_SYNC_MS',
    'eventmesh.security.gate.quota.syncMs',
    integer(50, 10000),
    () => 250,
    "How often an instance shares its tenants' usage with the others through Postgres; the runtime-wide overshoot is bounded by it.",
  ),
  adminFilters: setting(
    'EVENTMESH_ADMIN_SECURITY_FILTERS',
    'eventmesh.admin.security.filters',
    listOf(oneOf(ADMIN_GATE_FILTERS), ADMIN_GATE_FILTERS.join(', ')),
    (): AdminGateFilterName[] => [],
    "Filters of the admin API's gate (token: the admin scope is required, in report-only mode too; acl: the admin action). Unset: the admin API is open (said at boot and in /health), which an enforcing request gate refuses at boot.",
    '(none: open)',
  ),
  adminFailClosed: setting(
    'EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED',
    'eventmesh.admin.security.failClosed',
    bool,
    () => false,
    'As EVENTMESH_SECURITY_GATE_FAIL_CLOSED, for the admin API.',
  ),
  adminOperatorTenant: setting(
    'EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT',
    'eventmesh.admin.security.operatorTenant',
    tenantName,
    () => 'default',
    "The tenant whose admins run the whole runtime: partitions, instances, orphans, other tenants' quotas.",
  ),
  secretKeys: setting(
    'EVENTMESH_SECURITY_SECRETS_KEYS',
    'eventmesh.security.secrets.keys',
    secretKeys,
    () => [],
    'AES-256-GCM keys that encrypt secrets at rest (webhook signing secrets, publisher secrets), as id:base64key,...; required by an instance. `npm start` creates a local one on first run.',
    '(none)',
  ),
  secretActiveKey: setting(
    'EVENTMESH_SECURITY_SECRETS_ACTIVE_KEY',
    'eventmesh.security.secrets.activeKey',
    text,
    () => '',
    'The key id new secrets are encrypted with; the first of EVENTMESH_SECURITY_SECRETS_KEYS when unset. The others still decrypt (rotation).',
    '(the first key)',
  ),
  sinkAllowedRanges: setting(
    'EVENTMESH_SECURITY_SINKS_ALLOWED_RANGES',
    'eventmesh.security.sinks.allowedRanges',
    (raw: string): SinkRange[] =>
      raw === 'none' ? [] : listOf(oneOf(SINK_RANGES), `${SINK_RANGES.join(', ')} (or none)`)(raw),
    (): SinkRange[] => ['loopback'],
    'Address ranges a webhook sink may resolve to besides public addresses: loopback, private (RFC 1918, fc00::/7), or none. Link-local and cloud metadata addresses are always refused.',
  ),
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
      // A secret's value is never echoed (the message goes to the boot log).
      const shown = /SECRET/.test(s.env) ? '(hidden)' : `"${raw}"`;
      problems.push(`${s.env} (${s.key}) = ${shown} is not valid; legal values: ${legal}`);
    }
  }
  const v = values as Values;
  for (const [s, value] of [
    [SETTINGS.sessionsWindowBytes, v.sessionsWindowBytes],
    [SETTINGS.sessionsMaxWindowBytes, v.sessionsMaxWindowBytes],
  ] as const) {
    if (problems.length === 0 && value < v.sessionsMaxChunkBytes)
      problems.push(
        `${s.env} (${s.key}) = ${value} is below ${SETTINGS.sessionsMaxChunkBytes.env} (${v.sessionsMaxChunkBytes}): a window holds at least one chunk; legal values: an integer from ${v.sessionsMaxChunkBytes}`,
      );
  }
  if (problems.length === 0 && v.sessionsWindowBytes > v.sessionsMaxWindowBytes)
    problems.push(
      `${SETTINGS.sessionsWindowBytes.env} (${SETTINGS.sessionsWindowBytes.key}) = ${v.sessionsWindowBytes} is above ${SETTINGS.sessionsMaxWindowBytes.env} (${v.sessionsMaxWindowBytes}); legal values: an integer from ${v.sessionsMaxChunkBytes} to ${v.sessionsMaxWindowBytes}`,
    );
  if (problems.length === 0 && v.retryMaxMs < v.retryInitialMs) {
    problems.push(
      `${SETTINGS.retryMaxMs.env} (${SETTINGS.retryMaxMs.key}) must be at least ` +
        `${SETTINGS.retryInitialMs.env} (${v.retryInitialMs})`,
    );
  }
  if (problems.length === 0 && v.breakerMaxOpenMs < v.breakerOpenMs) {
    problems.push(
      `${SETTINGS.breakerMaxOpenMs.env} (${SETTINGS.breakerMaxOpenMs.key}) must be at least ` +
        `${SETTINGS.breakerOpenMs.env} (${v.breakerOpenMs})`,
    );
  }
  // Unset, the grace follows a long lease TTL; set, it must exceed it.
  if (problems.length === 0 && !env[SETTINGS.orphanGraceMs.env]?.trim())
    v.orphanGraceMs = Math.max(v.orphanGraceMs, 2 * v.leaseTtlMs);
  if (problems.length === 0 && v.orphanGraceMs < 2 * v.leaseTtlMs) {
    problems.push(
      `${SETTINGS.orphanGraceMs.env} (${SETTINGS.orphanGraceMs.key}) = ${v.orphanGraceMs} must be at least twice ` +
        `${SETTINGS.leaseTtlMs.env} (${v.leaseTtlMs}): a live dispatch run renews itself within a lease TTL; legal values: ` +
        `${2 * v.leaseTtlMs} to 86400000`,
    );
  }
  // Unset, the query timeout follows a long lease TTL; set, it must leave a fenced statement its lease TTL.
  if (problems.length === 0 && !env[SETTINGS.pgQueryTimeoutMs.env]?.trim())
    v.pgQueryTimeoutMs = Math.max(v.pgQueryTimeoutMs, 2 * v.leaseTtlMs);
  if (problems.length === 0 && v.pgQueryTimeoutMs < 2 * v.leaseTtlMs) {
    problems.push(
      `${SETTINGS.pgQueryTimeoutMs.env} (${SETTINGS.pgQueryTimeoutMs.key}) = ${v.pgQueryTimeoutMs} must be at least twice ` +
        `${SETTINGS.leaseTtlMs.env} (${v.leaseTtlMs}): a lease or dispatch-run transaction lets each statement run a lease TTL; legal values: ` +
        `${2 * v.leaseTtlMs} to 3600000`,
    );
  }
  if (problems.length === 0 && v.metricsScrapeSecret !== '' && v.metricsAdminGate) {
    problems.push(
      `${SETTINGS.metricsScrapeSecret.env} (${SETTINGS.metricsScrapeSecret.key}) is set while ${SETTINGS.metricsAdminGate.env}=true: ` +
        '/metrics takes one credential; legal values: one of them',
    );
  }
  // Node refuses a server whose headers timeout is longer than its request timeout (the headers are part of it).
  if (problems.length === 0 && v.httpHeadersTimeoutMs > v.httpRequestTimeoutMs) {
    problems.push(
      `${SETTINGS.httpHeadersTimeoutMs.env} (${SETTINGS.httpHeadersTimeoutMs.key}) = ${v.httpHeadersTimeoutMs} is longer than ` +
        `${SETTINGS.httpRequestTimeoutMs.env} (${v.httpRequestTimeoutMs}), which includes the headers; legal values: an integer from 1000 to ${v.httpRequestTimeoutMs}`,
    );
  }
  if (problems.length === 0 && v.httpProcesses > 1 && v.instanceRoles.join() !== 'gateway') {
    problems.push(
      `${SETTINGS.httpProcesses.env} (${SETTINGS.httpProcesses.key}) = ${v.httpProcesses} needs ` +
        `${SETTINGS.instanceRoles.env}=gateway (got "${v.instanceRoles.join(',')}"): the worker role runs once per instance; legal values: 1, ` +
        'or 1 to 64 in a gateway-only instance',
    );
  }
  if (problems.length === 0 && v.kafkaProduceQueueMaxEvents < v.kafkaProduceMaxBatchEvents) {
    problems.push(
      `${SETTINGS.kafkaProduceQueueMaxEvents.env} (${SETTINGS.kafkaProduceQueueMaxEvents.key}) = ${v.kafkaProduceQueueMaxEvents} ` +
        `is below ${SETTINGS.kafkaProduceMaxBatchEvents.env} (${v.kafkaProduceMaxBatchEvents}), so a full batch could never be taken; ` +
        `legal values: an integer from ${v.kafkaProduceMaxBatchEvents} to 10000000`,
    );
  }
  if (problems.length === 0 && v.kafkaProduceQueueMaxBytes < v.httpBodyLimitBytes) {
    problems.push(
      `${SETTINGS.kafkaProduceQueueMaxBytes.env} (${SETTINGS.kafkaProduceQueueMaxBytes.key}) = ${v.kafkaProduceQueueMaxBytes} ` +
        `is below ${SETTINGS.httpBodyLimitBytes.env} (${v.httpBodyLimitBytes}), so the largest publish could never be taken; ` +
        `legal values: an integer from ${v.httpBodyLimitBytes} to ${4 * 1024 * 1024 * 1024}`,
    );
  }
  if (problems.length === 0 && v.gateAuditSink === 'CLOUDEVENTS' && !v.kafkaTopics.includes(v.gateAuditTopic)) {
    problems.push(
      `${SETTINGS.gateAuditTopic.env} (${SETTINGS.gateAuditTopic.key}) = "${v.gateAuditTopic}" must name a served topic ` +
        `when ${SETTINGS.gateAuditSink.env}=CLOUDEVENTS; legal values: one of ${v.kafkaTopics.join(', ')}`,
    );
  }
  const jwtSource = v.tokenJwksUrl !== '' || v.tokenKeysFile !== '';
  for (const s of [SETTINGS.tokenIssuer, SETTINGS.tokenAudience]) {
    if (problems.length === 0 && jwtSource && (env[s.env]?.trim() ?? '') === '') {
      problems.push(
        `${s.env} (${s.key}) is required when ${SETTINGS.tokenJwksUrl.env} or ${SETTINGS.tokenKeysFile.env} is set; legal values: a non-empty string`,
      );
    }
  }
  if (
    problems.length === 0 &&
    v.secretKeys.length > 0 &&
    v.secretActiveKey !== '' &&
    !v.secretKeys.some((k) => k.id === v.secretActiveKey)
  ) {
    problems.push(
      `${SETTINGS.secretActiveKey.env} (${SETTINGS.secretActiveKey.key}) = "${v.secretActiveKey}" names no key; legal values: ` +
        v.secretKeys.map((k) => k.id).join(', '),
    );
  }
  // An open admin API beside an enforcing ingress gate lets anyone mint the credentials the ingress gate then
  // accepts: the enforcement would be a formality.
  if (problems.length === 0 && v.gateFilters.length > 0 && v.gateFailClosed && v.adminFilters.length === 0) {
    problems.push(
      `${SETTINGS.adminFilters.env} (${SETTINGS.adminFilters.key}) is empty (the admin API is open) while ` +
        `${SETTINGS.gateFilters.env}=${v.gateFilters.join(',')} and ${SETTINGS.gateFailClosed.env}=true enforce the request gate: anyone could ` +
        `mint the credentials it accepts; legal values: token or token,acl (or ${SETTINGS.gateFailClosed.env}=false)`,
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    instance: { id: v.instanceId, roles: v.instanceRoles, advertisedUrl: v.instanceAdvertisedUrl },
    http: {
      host: v.httpHost,
      port: v.httpPort,
      bodyLimitBytes: v.httpBodyLimitBytes,
      processes: v.httpProcesses,
      maxConnections: v.httpMaxConnections,
      maxPendingRequests: v.httpMaxPendingRequests,
      maxPendingRequestsPerTenant: v.httpMaxPendingRequestsPerTenant,
      retryAfterSeconds: v.httpRetryAfterSeconds,
      headersTimeoutMs: v.httpHeadersTimeoutMs,
      requestTimeoutMs: v.httpRequestTimeoutMs,
      keepAliveTimeoutMs: v.httpKeepAliveTimeoutMs,
    },
    delivery: {
      topology: v.topology,
      leaseTtlMs: v.leaseTtlMs,
      maxOwnedPartitions: v.maxOwnedPartitions,
      webhookTimeoutMs: v.webhookTimeoutMs,
      webhookOrigin: v.webhookOrigin,
      pollBatchMaxEvents: v.pollBatchMaxEvents,
      concurrency: v.deliveryConcurrency,
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
      deadLetterReplayRate: v.deadLetterReplayRate,
    },
    postgres: {
      host: v.pgHost,
      port: v.pgPort,
      user: v.pgUser,
      password: v.pgPassword,
      database: v.pgDatabase,
      poolSize: v.pgPoolSize,
      dispatchPoolSize: v.pgDispatchPoolSize,
      queryTimeoutMs: v.pgQueryTimeoutMs,
      leakDetectionThresholdMs: v.pgLeakDetectionThresholdMs,
    },
    kafka: {
      brokers: v.kafkaBrokers,
      clientId: v.kafkaClientId,
      topics: v.kafkaTopics,
      topicPartitions: v.kafkaTopicPartitions,
      tenantTopicsMax: v.kafkaTenantTopicsMax,
      tenantTopicMaxPartitions: v.kafkaTenantTopicMaxPartitions,
      sharedTopicAccess: v.kafkaSharedTopicAccess,
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
    sessions: {
      windowBytes: v.sessionsWindowBytes,
      maxWindowBytes: v.sessionsMaxWindowBytes,
      maxChunkBytes: v.sessionsMaxChunkBytes,
      maxRequestBytes: v.sessionsMaxRequestBytes,
      openTimeoutMs: v.sessionsOpenTimeoutMs,
      maxWaitMs: v.sessionsMaxWaitMs,
      heartbeatMs: v.sessionsHeartbeatMs,
      maxPerTenant: v.sessionsMaxPerTenant,
      maxAgentsPerTenant: v.sessionsMaxAgentsPerTenant,
      maxBytesInFlightPerTenant: v.sessionsMaxBytesInFlightPerTenant,
      historySize: v.sessionsHistorySize,
      subscriberWindowBytes: v.sessionsSubscriberWindowBytes,
      idleMs: v.sessionsIdleMs,
    },
    agents: {
      callTimeoutMs: v.agentsCallTimeoutMs,
      taskTimeoutMs: v.agentsTaskTimeoutMs,
      sendWaitMs: v.agentsSendWaitMs,
      heartbeatTtlMs: v.agentsHeartbeatTtlMs,
      maxStreams: v.agentsMaxStreams,
      streamPollMs: v.agentsStreamPollMs,
      streamHeartbeatMs: v.agentsStreamHeartbeatMs,
      pushSigningSecret: v.agentsPushSigningSecret,
      taskRetentionDays: v.agentsTaskRetentionDays,
      workerSlots: v.agentsWorkerSlots,
      maxAnswerBytes: v.agentsMaxAnswerBytes,
      maxPerTenant: v.agentsMaxPerTenant,
    },
    temporal: {
      address: v.temporalAddress,
      namespace: v.temporalNamespace,
      uiUrl: v.temporalUiUrl,
      connectTimeoutMs: v.temporalConnectTimeoutMs,
    },
    log: {
      level: v.logLevel,
      format: v.logFormat,
      access: v.logAccess,
      sinkFailureSummaryMs: v.logSinkFailureSummaryMs,
    },
    tracing: {
      enabled: v.tracingEnabled,
      otlpEndpoint: v.tracingOtlpEndpoint,
      serviceName: v.tracingServiceName,
      sampleRatio: v.tracingSampleRatio,
    },
    metrics: {
      enabled: v.metricsEnabled,
      adminGate: v.metricsAdminGate,
      temporalAddress: v.metricsTemporalAddress,
      scrapeSecret: v.metricsScrapeSecret,
      subscriptionLabels: v.metricsSubscriptionLabels,
    },
    health: { checkCacheMs: v.healthCheckCacheMs, dispatchStaleMs: v.healthDispatchStaleMs },
    filter: { maxAttributeChars: v.filterMaxAttributeChars },
    security: {
      gate: {
        filters: GATE_FILTERS.filter((f) => v.gateFilters.includes(f)),
        failClosed: v.gateFailClosed,
        audit: { sink: v.gateAuditSink, topic: v.gateAuditTopic, record: v.gateAuditRecord },
        token: {
          jwksUrl: v.tokenJwksUrl,
          keysFile: v.tokenKeysFile,
          issuer: v.tokenIssuer,
          audience: v.tokenAudience,
          algorithms: v.tokenAlgorithms,
          types: v.tokenTypes,
          clockSkewSeconds: v.tokenClockSkewSeconds,
          principalClaim: v.tokenPrincipalClaim,
          tenantClaim: v.tokenTenantClaim,
          scopesClaim: v.tokenScopesClaim,
          jwksCooldownMs: v.tokenJwksCooldownMs,
          jwksMaxAgeMs: v.tokenJwksMaxAgeMs,
          cacheMaxEntries: v.tokenCacheMaxEntries,
          apiKeyCacheMs: v.apiKeyCacheMs,
        },
        signature: { toleranceSeconds: v.signatureToleranceSeconds },
        acl: { refreshMs: v.aclRefreshMs, default: v.aclDefault, superUsers: v.aclSuperUsers },
        quota: {
          eventsPerSecond: v.quotaEventsPerSecond,
          bytesPerSecond: v.quotaBytesPerSecond,
          burstSeconds: v.quotaBurstSeconds,
          streamConnections: v.quotaStreamConnections,
          subscriptions: v.quotaSubscriptions,
          syncMs: v.quotaSyncMs,
        },
      },
      secrets: { keys: v.secretKeys, activeKey: v.secretActiveKey || (v.secretKeys[0]?.id ?? '') },
      sinks: { allowedRanges: v.sinkAllowedRanges },
    },
    admin: {
      security: {
        filters: ADMIN_GATE_FILTERS.filter((f) => v.adminFilters.includes(f)),
        failClosed: v.adminFailClosed,
        operatorTenant: v.adminOperatorTenant,
      },
    },
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

import { readFileSync } from 'node:fs';
import { settingsTable } from '../../scripts/write-config-docs';
import { ConfigError, describeSettings, loadConfig } from './config';

describe('loadConfig', () => {
  it('starts a single machine with no settings at all', () => {
    const config = loadConfig({});
    expect(config.delivery.topology).toBe('LOCAL_STICKY_PULL');
    expect(config.http.port).toBe(8080);
    expect(config.postgres).toMatchObject({ host: '127.0.0.1', port: 5432 });
    expect(config.kafka.brokers).toEqual(['127.0.0.1:9092']);
    expect(config.temporal).toMatchObject({ address: '127.0.0.1:7233', uiUrl: 'http://127.0.0.1:8233' });
    expect(config.instance.roles).toEqual(['gateway', 'worker']);
  });

  it.each([[''], ['   ']])('treats a blank topology (%j) as LOCAL_STICKY_PULL', (raw) => {
    expect(loadConfig({ EVENTMESH_DELIVERY_TOPOLOGY: raw }).delivery.topology).toBe('LOCAL_STICKY_PULL');
  });

  it('accepts PARTITION_OWNED_PULL', () => {
    expect(loadConfig({ EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL' }).delivery.topology).toBe(
      'PARTITION_OWNED_PULL',
    );
  });

  it.each([['local_sticky_pull'], ['PARTITION_OWNED'], ['PUSH']])(
    'refuses the unknown topology %j, naming the key and the legal values',
    (raw) => {
      expect(() => loadConfig({ EVENTMESH_DELIVERY_TOPOLOGY: raw })).toThrow(ConfigError);
      expect(() => loadConfig({ EVENTMESH_DELIVERY_TOPOLOGY: raw })).toThrow(
        `EVENTMESH_DELIVERY_TOPOLOGY (eventmesh.delivery.topology) = "${raw}" is not valid; legal values: one of LOCAL_STICKY_PULL, PARTITION_OWNED_PULL`,
      );
    },
  );

  it('lists every bad setting at once', () => {
    try {
      loadConfig({
        EVENTMESH_HTTP_PORT: '80a',
        EVENTMESH_KAFKA_BROKERS: 'nohost',
        EVENTMESH_INSTANCE_ROLES: 'gateway,db',
      });
      throw new Error('expected a ConfigError');
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      const problems = (e as ConfigError).problems;
      expect(problems).toHaveLength(3);
      expect(problems[0]).toContain('EVENTMESH_INSTANCE_ROLES (eventmesh.instance.roles) = "gateway,db"');
      expect(problems[1]).toContain(
        'EVENTMESH_HTTP_PORT (eventmesh.http.port) = "80a" is not valid; legal values: an integer from 0 to 65535',
      );
      expect(problems[2]).toContain(
        'EVENTMESH_KAFKA_BROKERS (eventmesh.kafka.brokers) = "nohost" is not valid; legal values: host:port',
      );
    }
  });

  it('parses lists and numbers', () => {
    const config = loadConfig({
      EVENTMESH_KAFKA_BROKERS: 'a:1, b:2',
      EVENTMESH_KAFKA_TOPICS: 'orders,payments',
      EVENTMESH_DELIVERY_LEASE_TTL_MS: '15000',
      EVENTMESH_INSTANCE_ROLES: 'worker',
    });
    expect(config.kafka.brokers).toEqual(['a:1', 'b:2']);
    expect(config.kafka.topics).toEqual(['orders', 'payments']);
    expect(config.delivery.leaseTtlMs).toBe(15000);
    expect(config.instance.roles).toEqual(['worker']);
  });

  it('reads the A2A task retention (30 days by default, 0 keeps them) and refuses values out of range', () => {
    expect(loadConfig({}).agents.taskRetentionDays).toBe(30);
    expect(loadConfig({ EVENTMESH_AGENTS_TASK_RETENTION_DAYS: '0' }).agents.taskRetentionDays).toBe(0);
    expect(() => loadConfig({ EVENTMESH_AGENTS_TASK_RETENTION_DAYS: '3651' })).toThrow(
      'EVENTMESH_AGENTS_TASK_RETENTION_DAYS (eventmesh.agents.taskRetentionDays) = "3651" is not valid; legal values: an integer from 0 to 3650',
    );
  });

  it('reads the A2A worker slots (200 by default) and refuses values out of range', () => {
    expect(loadConfig({}).agents.workerSlots).toBe(200);
    expect(loadConfig({ EVENTMESH_AGENTS_WORKER_SLOTS: '2' }).agents.workerSlots).toBe(2);
    expect(() => loadConfig({ EVENTMESH_AGENTS_WORKER_SLOTS: '1' })).toThrow(
      'EVENTMESH_AGENTS_WORKER_SLOTS (eventmesh.agents.workerSlots) = "1" is not valid; legal values: an integer from 2 to 10000',
    );
  });

  it('reads the dead-letter retention and the CESQL string bound, and refuses values out of range', () => {
    expect(loadConfig({}).delivery.deadLetterRetentionDays).toBe(30);
    expect(loadConfig({}).filter.maxAttributeChars).toBe(16384);
    const config = loadConfig({
      EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS: '0',
      EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS: '1048576',
    });
    expect(config.delivery.deadLetterRetentionDays).toBe(0);
    expect(config.filter.maxAttributeChars).toBe(1048576);
    expect(() => loadConfig({ EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS: '-1' })).toThrow(
      'EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS (eventmesh.delivery.deadLetterRetentionDays) = "-1" is not valid; legal values: an integer from 0 to 3650',
    );
    expect(() => loadConfig({ EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS: '100' })).toThrow(
      'EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS (eventmesh.filter.maxAttributeChars) = "100" is not valid; legal values: an integer from 256 to 1048576',
    );
  });

  it('reads the A2A push signing secret (unset: unsigned), and refuses one that is not whsec_ without echoing it', () => {
    expect(loadConfig({}).agents.pushSigningSecret).toBe('');
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    expect(loadConfig({ EVENTMESH_AGENTS_PUSH_SIGNING_SECRET: secret }).agents.pushSigningSecret).toBe(secret);
    for (const bad of ['s3cr3t-value', 'whsec_c2hvcnQ=']) {
      expect(() => loadConfig({ EVENTMESH_AGENTS_PUSH_SIGNING_SECRET: bad })).toThrow(
        'EVENTMESH_AGENTS_PUSH_SIGNING_SECRET (eventmesh.agents.pushSigningSecret) = (hidden) is not valid; legal values: whsec_ and 24 to 64 bytes in base64',
      );
    }
  });

  it('leaves tracing off by default, reads its settings, and refuses a bad sample ratio or endpoint naming the key', () => {
    expect(loadConfig({}).tracing).toEqual({
      enabled: false,
      otlpEndpoint: '',
      serviceName: 'eventmesh',
      sampleRatio: 1,
    });
    expect(
      loadConfig({
        EVENTMESH_TRACING_ENABLED: 'true',
        EVENTMESH_TRACING_OTLP_ENDPOINT: 'http://127.0.0.1:4318/',
        EVENTMESH_TRACING_SERVICE_NAME: 'mesh-eu',
        EVENTMESH_TRACING_SAMPLE_RATIO: '0.25',
      }).tracing,
    ).toEqual({ enabled: true, otlpEndpoint: 'http://127.0.0.1:4318', serviceName: 'mesh-eu', sampleRatio: 0.25 });
    for (const raw of ['1.5', '-0.1', 'half', '.5']) {
      expect(() => loadConfig({ EVENTMESH_TRACING_SAMPLE_RATIO: raw })).toThrow(
        `EVENTMESH_TRACING_SAMPLE_RATIO (eventmesh.tracing.sampleRatio) = "${raw}" is not valid; legal values: a decimal number from 0 to 1`,
      );
    }
    expect(() => loadConfig({ EVENTMESH_TRACING_OTLP_ENDPOINT: 'collector:4318' })).toThrow(
      'EVENTMESH_TRACING_OTLP_ENDPOINT (eventmesh.tracing.otlpEndpoint) = "collector:4318" is not valid; legal values: an http(s) URL',
    );
  });

  it('accepts JWT types at+jwt and JWT by default, reads others case-insensitively, and refuses a bad list naming the key and the legal values', () => {
    expect(loadConfig({}).security.gate.token.types).toEqual(['at+jwt', 'jwt']);
    expect(
      loadConfig({ EVENTMESH_SECURITY_GATE_TOKEN_TYPES: 'Application/AT+JWT, secevent+jwt' }).security.gate.token.types,
    ).toEqual(['at+jwt', 'secevent+jwt']);
    for (const raw of ['at jwt', ',', 'application/', 'a"b']) {
      expect(() => loadConfig({ EVENTMESH_SECURITY_GATE_TOKEN_TYPES: raw })).toThrow(
        new RegExp(
          `EVENTMESH_SECURITY_GATE_TOKEN_TYPES \\(eventmesh\\.security\\.gate\\.token\\.types\\) = .* is not valid; legal values: a comma-separated list of JWT types \\(typ\\)`,
        ),
      );
    }
  });

  it('refuses an enforcing ingress gate behind an open admin gate, naming both keys; any other combination boots', () => {
    expect(() =>
      loadConfig({ EVENTMESH_SECURITY_GATE_FILTERS: 'token', EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true' }),
    ).toThrow(
      /EVENTMESH_ADMIN_SECURITY_FILTERS \(eventmesh\.admin\.security\.filters\) is empty .*EVENTMESH_SECURITY_GATE_FAIL_CLOSED=true.*legal values: token or token,acl/,
    );
    expect(
      loadConfig({
        EVENTMESH_SECURITY_GATE_FILTERS: 'token',
        EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
        EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
      }).admin.security.filters,
    ).toEqual(['token']);
    expect(loadConfig({ EVENTMESH_SECURITY_GATE_FILTERS: 'token' }).admin.security.filters).toEqual([]);
    expect(loadConfig({}).security.gate.filters).toEqual([]);
  });

  it('refuses a retry ceiling below the first retry delay', () => {
    expect(() =>
      loadConfig({ EVENTMESH_DELIVERY_RETRY_INITIAL_MS: '5000', EVENTMESH_DELIVERY_RETRY_MAX_MS: '100' }),
    ).toThrow(
      'EVENTMESH_DELIVERY_RETRY_MAX_MS (eventmesh.delivery.retryMaxMs) must be at least EVENTMESH_DELIVERY_RETRY_INITIAL_MS',
    );
  });

  it('bounds delivery to a failing sink: breaker and parking cap defaults, each overridable', () => {
    expect(loadConfig({}).delivery).toMatchObject({
      breakerFailureThreshold: 5,
      breakerOpenMs: 1000,
      breakerMaxOpenMs: 30000,
      retryMaxParked: 10000,
      skipWarningMs: 7 * 24 * 3600 * 1000,
    });
    expect(
      loadConfig({
        EVENTMESH_DELIVERY_BREAKER_FAILURE_THRESHOLD: '3',
        EVENTMESH_DELIVERY_BREAKER_OPEN_MS: '500',
        EVENTMESH_DELIVERY_BREAKER_MAX_OPEN_MS: '500',
        EVENTMESH_DELIVERY_RETRY_MAX_PARKED: '20',
        EVENTMESH_DELIVERY_SKIP_WARNING_MS: '3600000',
      }).delivery,
    ).toMatchObject({
      breakerFailureThreshold: 3,
      breakerOpenMs: 500,
      breakerMaxOpenMs: 500,
      retryMaxParked: 20,
      skipWarningMs: 3600000,
    });
  });

  it.each([
    [
      'EVENTMESH_DELIVERY_BREAKER_FAILURE_THRESHOLD',
      'eventmesh.delivery.breakerFailureThreshold',
      '0',
      'an integer from 1 to 100000',
    ],
    ['EVENTMESH_DELIVERY_BREAKER_OPEN_MS', 'eventmesh.delivery.breakerOpenMs', '50', 'an integer from 100 to 3600000'],
    [
      'EVENTMESH_DELIVERY_RETRY_MAX_PARKED',
      'eventmesh.delivery.retryMaxParked',
      'many',
      'an integer from 1 to 10000000',
    ],
    [
      'EVENTMESH_DELIVERY_SKIP_WARNING_MS',
      'eventmesh.delivery.skipWarningMs',
      '-1',
      'an integer from 60000 to 31536000000',
    ],
  ])('refuses %s = %j, naming the key and the legal values', (env, key, raw, legal) => {
    expect(() => loadConfig({ [env]: raw })).toThrow(`${env} (${key}) = "${raw}" is not valid; legal values: ${legal}`);
  });

  it('refuses a breaker whose longest open period is shorter than its first', () => {
    expect(() =>
      loadConfig({ EVENTMESH_DELIVERY_BREAKER_OPEN_MS: '5000', EVENTMESH_DELIVERY_BREAKER_MAX_OPEN_MS: '1000' }),
    ).toThrow(
      'EVENTMESH_DELIVERY_BREAKER_MAX_OPEN_MS (eventmesh.delivery.breakerMaxOpenMs) must be at least EVENTMESH_DELIVERY_BREAKER_OPEN_MS (5000)',
    );
  });

  it('takes an advertised URL for the internal stream channel, derived at boot when unset', () => {
    expect(loadConfig({}).instance.advertisedUrl).toBe('');
    expect(loadConfig({ EVENTMESH_INSTANCE_ADVERTISED_URL: 'http://10.0.0.7:8080/' }).instance.advertisedUrl).toBe(
      'http://10.0.0.7:8080',
    );
    expect(() => loadConfig({ EVENTMESH_INSTANCE_ADVERTISED_URL: 'ws://x:1' })).toThrow(
      'EVENTMESH_INSTANCE_ADVERTISED_URL (eventmesh.instance.advertisedUrl) = "ws://x:1" is not valid; legal values: an http(s) URL',
    );
  });

  it('takes several gateway processes only in a gateway-only instance', () => {
    expect(loadConfig({ EVENTMESH_INSTANCE_ROLES: 'gateway', EVENTMESH_HTTP_PROCESSES: '2' }).http.processes).toBe(2);
    expect(loadConfig({}).http.processes).toBe(1);
    expect(() => loadConfig({ EVENTMESH_HTTP_PROCESSES: '2' })).toThrow(
      'EVENTMESH_HTTP_PROCESSES (eventmesh.http.processes) = 2 needs EVENTMESH_INSTANCE_ROLES=gateway (got "gateway,worker")',
    );
    expect(() => loadConfig({ EVENTMESH_HTTP_PROCESSES: '0' })).toThrow(
      'EVENTMESH_HTTP_PROCESSES (eventmesh.http.processes) = "0" is not valid; legal values: an integer from 1 to 64',
    );
  });

  it('takes orphaned subscriptions over automatically after three minutes unless told otherwise', () => {
    expect(loadConfig({}).delivery).toMatchObject({ orphanGraceMs: 180000, orphanTakeover: 'AUTOMATIC' });
    expect(
      loadConfig({ EVENTMESH_DELIVERY_ORPHAN_TAKEOVER: 'MANUAL', EVENTMESH_DELIVERY_ORPHAN_GRACE_MS: '20000' })
        .delivery,
    ).toMatchObject({
      orphanGraceMs: 20000,
      orphanTakeover: 'MANUAL',
    });
    expect(() => loadConfig({ EVENTMESH_DELIVERY_ORPHAN_TAKEOVER: 'off' })).toThrow(
      'EVENTMESH_DELIVERY_ORPHAN_TAKEOVER (eventmesh.delivery.orphanTakeover) = "off" is not valid; legal values: one of AUTOMATIC, MANUAL',
    );
    // 0 does not turn the takeover off (EVENTMESH_DELIVERY_ORPHAN_TAKEOVER=MANUAL does): orphans are still reported.
    expect(() => loadConfig({ EVENTMESH_DELIVERY_ORPHAN_GRACE_MS: '0' })).toThrow(
      'EVENTMESH_DELIVERY_ORPHAN_GRACE_MS (eventmesh.delivery.orphanGraceMs) = "0" is not valid; legal values: an integer from 6000 to 86400000',
    );
  });

  it('bounds every Postgres statement at 30 s, or two lease TTLs if more, and refuses a bound a fenced statement could outlive', () => {
    expect(loadConfig({}).postgres.queryTimeoutMs).toBe(30000);
    expect(loadConfig({ EVENTMESH_DELIVERY_LEASE_TTL_MS: '60000' }).postgres.queryTimeoutMs).toBe(120000);
    expect(
      loadConfig({ EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000', EVENTMESH_POSTGRES_QUERY_TIMEOUT_MS: '8000' }).postgres
        .queryTimeoutMs,
    ).toBe(8000);
    expect(() => loadConfig({ EVENTMESH_POSTGRES_QUERY_TIMEOUT_MS: '15000' })).toThrow(
      'EVENTMESH_POSTGRES_QUERY_TIMEOUT_MS (eventmesh.postgres.queryTimeoutMs) = 15000 must be at least twice EVENTMESH_DELIVERY_LEASE_TTL_MS (10000): ' +
        'a lease or dispatch-run transaction lets each statement run a lease TTL; legal values: 20000 to 3600000',
    );
    expect(() => loadConfig({ EVENTMESH_POSTGRES_QUERY_TIMEOUT_MS: '0' })).toThrow(
      'EVENTMESH_POSTGRES_QUERY_TIMEOUT_MS (eventmesh.postgres.queryTimeoutMs) = "0" is not valid; legal values: an integer from 1000 to 3600000',
    );
  });

  it('refuses an orphan grace shorter than two lease TTLs, when a live run could look dead', () => {
    expect(loadConfig({ EVENTMESH_DELIVERY_LEASE_TTL_MS: '120000' }).delivery.orphanGraceMs).toBe(240000);
    expect(
      loadConfig({ EVENTMESH_DELIVERY_LEASE_TTL_MS: '3000', EVENTMESH_DELIVERY_ORPHAN_GRACE_MS: '6000' }).delivery
        .orphanGraceMs,
    ).toBe(6000);
    expect(() =>
      loadConfig({ EVENTMESH_DELIVERY_LEASE_TTL_MS: '10000', EVENTMESH_DELIVERY_ORPHAN_GRACE_MS: '15000' }),
    ).toThrow(
      'EVENTMESH_DELIVERY_ORPHAN_GRACE_MS (eventmesh.delivery.orphanGraceMs) = 15000 must be at least twice EVENTMESH_DELIVERY_LEASE_TTL_MS (10000): ' +
        'a live dispatch run renews itself within a lease TTL; legal values: 20000 to 86400000',
    );
  });

  it("limits a slow client by default, takes legal timeouts, and refuses a headers timeout longer than the request's", () => {
    expect(loadConfig({}).http).toMatchObject({
      headersTimeoutMs: 10000,
      requestTimeoutMs: 60000,
      keepAliveTimeoutMs: 72000,
    });
    expect(
      loadConfig({
        EVENTMESH_HTTP_HEADERS_TIMEOUT_MS: '2000',
        EVENTMESH_HTTP_REQUEST_TIMEOUT_MS: '2000',
        EVENTMESH_HTTP_KEEP_ALIVE_TIMEOUT_MS: '5000',
      }).http,
    ).toMatchObject({ headersTimeoutMs: 2000, requestTimeoutMs: 2000, keepAliveTimeoutMs: 5000 });
    expect(() => loadConfig({ EVENTMESH_HTTP_REQUEST_TIMEOUT_MS: '0' })).toThrow(
      'EVENTMESH_HTTP_REQUEST_TIMEOUT_MS (eventmesh.http.requestTimeoutMs) = "0" is not valid; legal values: an integer from 1000 to 3600000',
    );
    expect(() =>
      loadConfig({ EVENTMESH_HTTP_HEADERS_TIMEOUT_MS: '30000', EVENTMESH_HTTP_REQUEST_TIMEOUT_MS: '20000' }),
    ).toThrow(
      'EVENTMESH_HTTP_HEADERS_TIMEOUT_MS (eventmesh.http.headersTimeoutMs) = 30000 is longer than EVENTMESH_HTTP_REQUEST_TIMEOUT_MS (20000), ' +
        'which includes the headers; legal values: an integer from 1000 to 20000',
    );
  });

  it('takes a scrape secret of 32 characters or more, never echoed, and not beside the admin gate on /metrics', () => {
    expect(loadConfig({}).metrics).toMatchObject({ scrapeSecret: '', subscriptionLabels: false });
    expect(loadConfig({ EVENTMESH_METRICS_SCRAPE_SECRET: 'a'.repeat(32) }).metrics.scrapeSecret).toBe('a'.repeat(32));
    expect(() => loadConfig({ EVENTMESH_METRICS_SCRAPE_SECRET: 'short' })).toThrow(
      'EVENTMESH_METRICS_SCRAPE_SECRET (eventmesh.metrics.scrapeSecret) = (hidden) is not valid; legal values: 32 to 256 visible ASCII characters',
    );
    expect(() =>
      loadConfig({ EVENTMESH_METRICS_SCRAPE_SECRET: 'a'.repeat(32), EVENTMESH_METRICS_ADMIN_GATE: 'true' }),
    ).toThrow(
      'EVENTMESH_METRICS_SCRAPE_SECRET (eventmesh.metrics.scrapeSecret) is set while EVENTMESH_METRICS_ADMIN_GATE=true',
    );
  });

  it('bounds what a gateway holds: defaults, and caps that can always take one whole request', () => {
    const config = loadConfig({});
    expect(config.kafka).toMatchObject({
      produceQueueMaxEvents: 20000,
      produceQueueMaxBytes: 64 * 1024 * 1024,
      publishTimeoutMs: 5000,
      requestTimeoutMs: 10000,
    });
    expect(config.http).toMatchObject({
      maxConnections: 10000,
      maxPendingRequests: 1000,
      maxPendingRequestsPerTenant: 100,
      retryAfterSeconds: 1,
    });
    expect(config.agents.maxAnswerBytes).toBe(16 * 1024 * 1024);
    expect(
      loadConfig({ EVENTMESH_HTTP_MAX_PENDING_REQUESTS_PER_TENANT: '5', EVENTMESH_AGENTS_MAX_ANSWER_BYTES: '65536' }),
    ).toMatchObject({
      http: { maxPendingRequestsPerTenant: 5 },
      agents: { maxAnswerBytes: 65536 },
    });
    expect(() => loadConfig({ EVENTMESH_HTTP_MAX_PENDING_REQUESTS_PER_TENANT: '0' })).toThrow(
      'EVENTMESH_HTTP_MAX_PENDING_REQUESTS_PER_TENANT (eventmesh.http.maxPendingRequestsPerTenant) = "0" is not valid; legal values: an integer from 1 to 1000000',
    );
    expect(() => loadConfig({ EVENTMESH_AGENTS_MAX_ANSWER_BYTES: '1MiB' })).toThrow(
      'EVENTMESH_AGENTS_MAX_ANSWER_BYTES (eventmesh.agents.maxAnswerBytes) = "1MiB" is not valid; legal values: an integer from 1024 to 1073741824',
    );
    expect(config.streams.pollMaxConsumers).toBe(100);
    expect(() =>
      loadConfig({ EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_EVENTS: '100', EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS: '500' }),
    ).toThrow(
      'EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_EVENTS (eventmesh.kafka.produceQueueMaxEvents) = 100 is below EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS (500)',
    );
    expect(() =>
      loadConfig({ EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_BYTES: '2048', EVENTMESH_HTTP_BODY_LIMIT_BYTES: '4096' }),
    ).toThrow(
      'EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_BYTES (eventmesh.kafka.produceQueueMaxBytes) = 2048 is below EVENTMESH_HTTP_BODY_LIMIT_BYTES (4096)',
    );
    expect(() => loadConfig({ EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS: '0' })).toThrow(
      'EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS (eventmesh.kafka.publishTimeoutMs) = "0" is not valid; legal values: an integer from 100 to 120000',
    );
    expect(() => loadConfig({ EVENTMESH_KAFKA_REQUEST_TIMEOUT_MS: '0' })).toThrow(
      'EVENTMESH_KAFKA_REQUEST_TIMEOUT_MS (eventmesh.kafka.requestTimeoutMs) = "0" is not valid; legal values: an integer from 1000 to 300000',
    );
    expect(() => loadConfig({ EVENTMESH_HTTP_MAX_CONNECTIONS: '0' })).toThrow(
      'EVENTMESH_HTTP_MAX_CONNECTIONS (eventmesh.http.maxConnections) = "0" is not valid',
    );
    expect(() => loadConfig({ EVENTMESH_HTTP_MAX_PENDING_REQUESTS: 'x' })).toThrow(
      'EVENTMESH_HTTP_MAX_PENDING_REQUESTS (eventmesh.http.maxPendingRequests) = "x" is not valid',
    );
    expect(() => loadConfig({ EVENTMESH_STREAMS_POLL_MAX_CONSUMERS: '0' })).toThrow(
      'EVENTMESH_STREAMS_POLL_MAX_CONSUMERS (eventmesh.streams.pollMaxConsumers) = "0" is not valid',
    );
    expect(() => loadConfig({ EVENTMESH_HTTP_RETRY_AFTER_SECONDS: '0' })).toThrow(
      'EVENTMESH_HTTP_RETRY_AFTER_SECONDS (eventmesh.http.retryAfterSeconds) = "0" is not valid',
    );
  });

  it('documents every setting with an environment variable and an eventmesh.* key', () => {
    const settings = describeSettings();
    expect(settings.length).toBeGreaterThan(20);
    for (const s of settings) {
      expect(s.env).toMatch(/^EVENTMESH_[A-Z_]+$/);
      expect(s.key).toMatch(/^eventmesh(\.[a-z][A-Za-z]*){2,4}$/);
    }
  });
});

describe('docs/configuration.md', () => {
  it('lists exactly the settings the code reads (npm run docs:config rewrites it)', () => {
    const doc = readFileSync(`${__dirname}/../../docs/configuration.md`, 'utf8');
    expect(doc).toContain(settingsTable());
  });
});

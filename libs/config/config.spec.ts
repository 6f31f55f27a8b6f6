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
      loadConfig({ EVENTMESH_HTTP_PORT: '80a', EVENTMESH_KAFKA_BROKERS: 'nohost', EVENTMESH_INSTANCE_ROLES: 'gateway,db' });
      throw new Error('expected a ConfigError');
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      const problems = (e as ConfigError).problems;
      expect(problems).toHaveLength(3);
      expect(problems[0]).toContain('EVENTMESH_INSTANCE_ROLES (eventmesh.instance.roles) = "gateway,db"');
      expect(problems[1]).toContain('EVENTMESH_HTTP_PORT (eventmesh.http.port) = "80a" is not valid; legal values: an integer from 0 to 65535');
      expect(problems[2]).toContain('EVENTMESH_KAFKA_BROKERS (eventmesh.kafka.brokers) = "nohost" is not valid; legal values: host:port');
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

  it('refuses a retry ceiling below the first retry delay', () => {
    expect(() => loadConfig({ EVENTMESH_DELIVERY_RETRY_INITIAL_MS: '5000', EVENTMESH_DELIVERY_RETRY_MAX_MS: '100' })).toThrow(
      'EVENTMESH_DELIVERY_RETRY_MAX_MS (eventmesh.delivery.retryMaxMs) must be at least EVENTMESH_DELIVERY_RETRY_INITIAL_MS',
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

  it('bounds what a gateway holds: defaults, and caps that can always take one whole request', () => {
    const config = loadConfig({});
    expect(config.kafka).toMatchObject({ produceQueueMaxEvents: 20000, produceQueueMaxBytes: 64 * 1024 * 1024, publishTimeoutMs: 5000, requestTimeoutMs: 10000 });
    expect(config.http).toMatchObject({ maxConnections: 10000, maxPendingRequests: 1000, retryAfterSeconds: 1 });
    expect(config.streams.pollMaxConsumers).toBe(100);
    expect(() => loadConfig({ EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_EVENTS: '100', EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS: '500' })).toThrow(
      'EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_EVENTS (eventmesh.kafka.produceQueueMaxEvents) = 100 is below EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS (500)',
    );
    expect(() => loadConfig({ EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_BYTES: '2048', EVENTMESH_HTTP_BODY_LIMIT_BYTES: '4096' })).toThrow(
      'EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_BYTES (eventmesh.kafka.produceQueueMaxBytes) = 2048 is below EVENTMESH_HTTP_BODY_LIMIT_BYTES (4096)',
    );
    expect(() => loadConfig({ EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS: '0' })).toThrow(
      'EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS (eventmesh.kafka.publishTimeoutMs) = "0" is not valid; legal values: an integer from 100 to 120000',
    );
    expect(() => loadConfig({ EVENTMESH_KAFKA_REQUEST_TIMEOUT_MS: '0' })).toThrow(
      'EVENTMESH_KAFKA_REQUEST_TIMEOUT_MS (eventmesh.kafka.requestTimeoutMs) = "0" is not valid; legal values: an integer from 1000 to 300000',
    );
    expect(() => loadConfig({ EVENTMESH_HTTP_MAX_CONNECTIONS: '0' })).toThrow('EVENTMESH_HTTP_MAX_CONNECTIONS (eventmesh.http.maxConnections) = "0" is not valid');
    expect(() => loadConfig({ EVENTMESH_HTTP_MAX_PENDING_REQUESTS: 'x' })).toThrow('EVENTMESH_HTTP_MAX_PENDING_REQUESTS (eventmesh.http.maxPendingRequests) = "x" is not valid');
    expect(() => loadConfig({ EVENTMESH_STREAMS_POLL_MAX_CONSUMERS: '0' })).toThrow('EVENTMESH_STREAMS_POLL_MAX_CONSUMERS (eventmesh.streams.pollMaxConsumers) = "0" is not valid');
    expect(() => loadConfig({ EVENTMESH_HTTP_RETRY_AFTER_SECONDS: '0' })).toThrow('EVENTMESH_HTTP_RETRY_AFTER_SECONDS (eventmesh.http.retryAfterSeconds) = "0" is not valid');
  });

  it('documents every setting with an environment variable and an eventmesh.* key', () => {
    const settings = describeSettings();
    expect(settings.length).toBeGreaterThan(20);
    for (const s of settings) {
      expect(s.env).toMatch(/^EVENTMESH_[A-Z_]+$/);
      expect(s.key).toMatch(/^eventmesh\.[a-z]+\.[A-Za-z]+$/);
    }
  });
});

describe('docs/configuration.md', () => {
  it('lists exactly the settings the code reads (npm run docs:config rewrites it)', () => {
    const doc = readFileSync(`${__dirname}/../../docs/configuration.md`, 'utf8');
    expect(doc).toContain(settingsTable());
  });
});

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

  it('reads the dead-letter retention and the CESQL string bound, and refuses values out of range', () => {
    expect(loadConfig({}).delivery.deadLetterRetentionDays).toBe(30);
    expect(loadConfig({}).filter.maxAttributeChars).toBe(16384);
    const config = loadConfig({ EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS: '0', EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS: '1048576' });
    expect(config.delivery.deadLetterRetentionDays).toBe(0);
    expect(config.filter.maxAttributeChars).toBe(1048576);
    expect(() => loadConfig({ EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS: '-1' })).toThrow(
      'EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS (eventmesh.delivery.deadLetterRetentionDays) = "-1" is not valid; legal values: an integer from 0 to 3650',
    );
    expect(() => loadConfig({ EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS: '100' })).toThrow(
      'EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS (eventmesh.filter.maxAttributeChars) = "100" is not valid; legal values: an integer from 256 to 1048576',
    );
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

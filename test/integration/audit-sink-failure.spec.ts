import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { createKafka } from '@libs/kafka';
import { newApiKeyCredential } from '@libs/security/api-key-credential';
import { ApiKeyStore, createDataSource } from '@libs/storage';
import { GATES_ENFORCING_TOKEN, testConfig } from '../support/env';
import { parsePrometheusText, sampleOf } from '../support/prometheus-text';
import { waitFor } from '../support/wait-for';

interface Health {
  status: string;
  warnings?: { code: string; message: string; sink?: string; failed?: number }[];
  stats: {
    security: {
      ingress: { audit?: { status: string; written: number; failed: number; lastFailure?: { reason: string } } };
    };
  };
}

/**
 * The CloudEvents audit sink with its topic gone, on a real instance (real Kafka, the topic deleted under it): the
 * requests are still served, and the failure is counted in /metrics and shown in /health (degraded, with the
 * reason) while the instance stays up.
 */
describe('an audit sink that fails (real Kafka, the audit topic deleted)', () => {
  const run = randomUUID().slice(0, 6);
  const topic = `audit-events-${run}`;
  const auditTopic = `audit-${run}`;
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `audit-fail-${run}`,
    EVENTMESH_KAFKA_TOPICS: `${topic},${auditTopic}`,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    // A write to a topic that is gone fails at the publish timeout: short, so the test waits little.
    EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS: '1000',
    ...GATES_ENFORCING_TOKEN,
    EVENTMESH_SECURITY_GATE_AUDIT_SINK: 'CLOUDEVENTS',
    EVENTMESH_SECURITY_GATE_AUDIT_TOPIC: auditTopic,
  });
  let key: string;
  let db: DataSource;
  let instance: RunningInstance;
  let url: string;

  beforeAll(async () => {
    db = createDataSource(config.postgres, `audit-fail-${run}`);
    await db.initialize();
    // A publisher's API key, written as key:bootstrap writes one: the instance builds its own gates (real
    // TokenAuth, its audit sink and that sink's producer) from the configuration.
    const credential = newApiKeyCredential();
    await new ApiKeyStore(db).create({
      id: credential.id,
      tenant: `audit-${run}`,
      principal: 'publisher',
      name: 'publisher',
      scopes: ['publish'],
      secretHash: credential.secretHash,
    });
    key = credential.token;
    instance = await startInstance(config, { roles: ['gateway'] });
    url = instance.url!;
  });
  afterAll(async () => {
    await instance?.close();
    await db?.destroy();
  });

  const health = async (): Promise<Health> => (await fetch(`${url}/health`)).json() as Promise<Health>;
  const refused = () =>
    fetch(`${url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: '{}',
    });
  const publish = () =>
    fetch(`${url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/audit-spec', type: 't' }),
    });

  it('serves the requests, and shows the failure in /metrics and /health (degraded, with the reason)', async () => {
    expect((await refused()).status).toBe(401);
    const written = await waitFor("the first refusal's audit record written", async () => {
      const audit = (await health()).stats.security.ingress.audit;
      return audit?.written === 1 && audit;
    });
    expect(written).toMatchObject({ status: 'up', failed: 0 });

    const admin = createKafka(config.kafka, `audit-fail-${run}`).admin();
    await admin.connect();
    try {
      await admin.deleteTopics({ topics: [auditTopic] });
    } finally {
      await admin.disconnect();
    }
    // Refusals go on being answered, and audited into a topic that is gone; publishes go on being written.
    const degraded = await waitFor(
      'an audit write failed',
      async () => {
        expect((await refused()).status).toBe(401);
        expect((await publish()).status).toBe(202);
        const report = await health();
        // The warnings are read once per health round (EVENTMESH_HEALTH_CHECK_CACHE_MS), the stats on each call.
        return (
          report.stats.security.ingress.audit?.status === 'degraded' &&
          report.warnings?.some((w) => w.code === 'AUDIT_DEGRADED') &&
          report
        );
      },
      { timeoutMs: 60000, intervalMs: 500 },
    );
    expect(degraded.status).toBe('up');
    expect(degraded.warnings).toContainEqual(
      expect.objectContaining({
        code: 'AUDIT_DEGRADED',
        sink: 'CLOUDEVENTS',
        message: expect.stringContaining(auditTopic),
      }),
    );
    expect(degraded.stats.security.ingress.audit?.lastFailure?.reason).toContain(auditTopic);

    const metrics = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
    expect(sampleOf(metrics, 'eventmesh_audit_degraded')).toBe(1);
    expect(
      sampleOf(metrics, 'eventmesh_audit_records_total', { sink: 'CLOUDEVENTS', outcome: 'failed' }),
    ).toBeGreaterThanOrEqual(1);
    expect(sampleOf(metrics, 'eventmesh_audit_records_total', { sink: 'CLOUDEVENTS', outcome: 'written' })).toBe(1);
  }, 120000);
});

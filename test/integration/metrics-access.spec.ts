import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import type { EventProducer } from '@libs/kafka';
import { buildGates } from '@libs/security';
import { createDataSource } from '@libs/storage';
import { GATES_ENFORCING_TOKEN, testConfig, uniqueTopic } from '../support/env';
import { HeaderToken } from '../support/header-tenant-gate';
import { parsePrometheusText } from '../support/prometheus-text';
import { terminateDispatch } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

const SECRET = 'scrape-0123456789abcdef0123456789abcdef';

/**
 * GET /metrics with the gates on, on a real instance (gateway and worker, real servers): the scrape secret is the
 * one credential it takes (none, a wrong one, or an operator's admin credential is 401), and a scrape shows no
 * subscription id (a tenant's) while the operator has not asked for them, though the instance dispatches one, and
 * shows them once it has (EVENTMESH_METRICS_SUBSCRIPTION_LABELS=true).
 */
describe('GET /metrics: the scrape secret and subscription labels (gates on, real servers)', () => {
  const run = randomUUID().slice(0, 6);
  const topic = uniqueTopic('metrics-access');
  const env = {
    EVENTMESH_INSTANCE_ID: `metrics-access-${run}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    EVENTMESH_HTTP_PORT: '0',
    ...GATES_ENFORCING_TOKEN,
    EVENTMESH_METRICS_SCRAPE_SECRET: SECRET,
  };
  const config = testConfig(env);
  const tenant = `tenant-${run}`;
  const as = { 'x-test-principal': 'p', 'x-test-tenant': tenant };
  const operator = { 'x-test-principal': 'root', 'x-test-tenant': 'default' };
  const receiver = new WebhookReceiver();
  let db: DataSource;
  let instance: RunningInstance;
  /** The subscription the instance dispatches (made by the second case). */
  let subscriptionId: string;

  const start = (cfg: typeof config) =>
    startInstance(cfg, {
      gates: buildGates(cfg, {
        db,
        producer: {} as EventProducer,
        instanceId: cfg.instance.id,
        filters: { token: new HeaderToken() },
      }),
    });

  beforeAll(async () => {
    await receiver.start();
    db = createDataSource(config.postgres, `metrics-access-${run}`);
    await db.initialize();
    instance = await start(config);
  });
  afterAll(async () => {
    await instance?.close();
    await receiver.stop();
    await db?.destroy();
    await terminateDispatch(config.instance.id);
  });

  const scrape = (headers: Record<string, string> = {}) => fetch(`${instance.url}/metrics`, { headers });

  it('takes the scrape secret and nothing else', async () => {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: `Bearer ${SECRET}x` },
      { authorization: SECRET },
      operator,
    ];
    for (const headers of attempts) {
      const refused = await scrape(headers);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="metrics"');
      expect(await refused.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    }
    const scraped = await scrape({ authorization: `Bearer ${SECRET}` });
    expect(scraped.status).toBe(200);
    expect(parsePrometheusText(await scraped.text()).families.get('eventmesh_publish_requests_total')).toBe('counter');
    // The secret opens nothing but /metrics.
    expect(
      (await fetch(`${instance.url}/subscriptions`, { headers: { authorization: `Bearer ${SECRET}` } })).status,
    ).toBe(401);
  });

  it('shows no subscription id of a subscription the instance dispatches', async () => {
    const created = await fetch(`${instance.url}/subscriptions`, {
      method: 'POST',
      headers: { ...as, 'content-type': 'application/json' },
      body: JSON.stringify({ sink: receiver.url, topic }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    subscriptionId = id;
    const published = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { ...as, 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/metrics-access', type: 't' }),
    });
    expect(published.status).toBe(202);
    // Its delivery is counted once its lane moved past it: the lane's lag is then a series this instance holds.
    const text = await waitFor(
      'the delivery counted in the scrape',
      async () => {
        const body = await (await scrape({ authorization: `Bearer ${SECRET}` })).text();
        const delivered = parsePrometheusText(body).samples.find(
          (s) => s.name === 'eventmesh_delivery_attempts_total' && s.labels.outcome === 'delivered',
        );
        return delivered?.value === 1 && body;
      },
      { timeoutMs: 60000 },
    );
    const exposition = parsePrometheusText(text);
    expect(exposition.families.get('eventmesh_delivery_lag_events')).toBe('gauge');
    expect(exposition.samples.filter((s) => 'subscription' in s.labels)).toEqual([]);
    expect(text).not.toContain(id);
  }, 120000);

  it('shows the subscription ids once the operator asks (EVENTMESH_METRICS_SUBSCRIPTION_LABELS=true)', async () => {
    // The same instance started again with the labels asked for: it dispatches the same subscription.
    await instance.close();
    instance = await start(testConfig({ ...env, EVENTMESH_METRICS_SUBSCRIPTION_LABELS: 'true' }));
    const lag = await waitFor(
      "the subscription's lag in the scrape",
      async () =>
        parsePrometheusText(await (await scrape({ authorization: `Bearer ${SECRET}` })).text()).samples.find(
          (s) => s.name === 'eventmesh_delivery_lag_events' && s.labels.subscription === subscriptionId,
        ),
      { timeoutMs: 60000 },
    );
    expect(lag).toMatchObject({ labels: { subscription: subscriptionId, topic, partition: '0' } });
  }, 120000);
});

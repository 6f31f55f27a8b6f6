import { randomUUID } from 'node:crypto';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { SkippedRangeStore, SubscriptionEntity } from '@libs/storage';
import { testConfig, uniqueTopic } from '../support/env';

/**
 * Skipped events are never silent to an operator: `/health` warns (staying 200 and up) with how many, for which
 * subscriptions and since when, and `GET /subscriptions/{id}/skipped-ranges` lists a subscription's ranges.
 */
describe('skipped events on /health and the API (real Postgres)', () => {
  const topic = uniqueTopic('skips');
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `skips-${randomUUID().slice(0, 8)}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    EVENTMESH_HTTP_PORT: '0',
    // Each /health here must see the skips recorded just before it, not a round shared from the previous call.
    EVENTMESH_HEALTH_CHECK_CACHE_MS: '0',
  });
  let instance: RunningInstance;
  let store: SkippedRangeStore;

  beforeAll(async () => {
    instance = await startInstance(config, { roles: ['gateway'] });
    store = new SkippedRangeStore(instance.deps.db);
    // Other specs of the run record skips too; this one counts its own.
    await instance.deps.db.query('DELETE FROM skipped_ranges');
  });
  afterAll(() => instance?.close());

  async function subscription(): Promise<string> {
    const id = randomUUID();
    await instance.deps.db.manager.insert(SubscriptionEntity, {
      id,
      topic,
      protocol: 'HTTP',
      sink: 'http://127.0.0.1:9/x',
      instanceId: config.instance.id,
      status: 'ACTIVE',
    });
    return id;
  }

  const health = async () => {
    const response = await fetch(`${instance.url}/health`);
    return {
      status: response.status,
      body: (await response.json()) as { status: string; warnings?: Record<string, unknown>[] },
    };
  };

  // Other warnings (orphaned subscriptions other tests left in the shared database) are not this spec's.
  const skippedWarnings = (body: { warnings?: Record<string, unknown>[] }) =>
    (body.warnings ?? []).filter((w) => w.code === 'EVENTS_SKIPPED');

  it('has no warning while nothing was skipped', async () => {
    const { status, body } = await health();
    expect(status).toBe(200);
    expect(body.status).toBe('up');
    expect(skippedWarnings(body)).toEqual([]);
  });

  it('warns on /health, still 200 and up, with how many events, which subscriptions and since when', async () => {
    const a = await subscription();
    const b = await subscription();
    await store.record({
      subscriptionId: a,
      topic,
      partition: 0,
      fromOffset: 0,
      toOffset: 100,
      reason: 'RETENTION',
      epoch: 0,
    });
    await store.record({
      subscriptionId: a,
      topic,
      partition: 0,
      fromOffset: 150,
      toOffset: 170,
      reason: 'RETENTION',
      epoch: 0,
    });
    await store.record({
      subscriptionId: b,
      topic,
      partition: 0,
      fromOffset: 5,
      toOffset: 6,
      reason: 'RETENTION',
      epoch: 0,
    });
    const [{ first }]: { first: Date }[] = await instance.deps.db.query(
      'SELECT min(first_recorded_at) AS first FROM skipped_ranges WHERE subscription_id = ANY($1::uuid[])',
      [[a, b]],
    );

    const { status, body } = await health();
    expect(status).toBe(200);
    expect(body.status).toBe('up');
    expect(skippedWarnings(body)).toHaveLength(1);
    const [warning] = skippedWarnings(body);
    expect(warning).toMatchObject({
      code: 'EVENTS_SKIPPED',
      events: 121,
      subscriptionCount: 2,
      since: first.toISOString(),
    });
    expect(warning.message).toContain('Kafka retention deleted 121 event(s) before delivery, for 2 subscription(s)');
    expect(warning.subscriptions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: a, events: 120, ranges: 2 }),
        expect.objectContaining({ id: b, events: 1, ranges: 1 }),
      ]),
    );
  });

  it("lists a subscription's skipped ranges; an unknown or malformed id is 404 SUBSCRIPTION_NOT_FOUND", async () => {
    const id = await subscription();
    await store.record({
      subscriptionId: id,
      topic,
      partition: 0,
      fromOffset: 40,
      toOffset: 90,
      reason: 'RETENTION',
      epoch: 0,
    });
    const response = await fetch(`${instance.url}/subscriptions/${id}/skipped-ranges`);
    expect(response.status).toBe(200);
    const ranges = (await response.json()) as Record<string, unknown>[];
    expect(ranges).toEqual([
      expect.objectContaining({ topic, partition: 0, fromOffset: 40, toOffset: 90, events: 50, reason: 'RETENTION' }),
    ]);

    const none = await subscription();
    expect(await (await fetch(`${instance.url}/subscriptions/${none}/skipped-ranges`)).json()).toEqual([]);

    for (const unknown of [randomUUID(), 'not-a-uuid']) {
      const missing = await fetch(`${instance.url}/subscriptions/${unknown}/skipped-ranges`);
      expect(missing.status).toBe(404);
      expect(await missing.json()).toMatchObject({
        code: 'SUBSCRIPTION_NOT_FOUND',
        message: `subscription ${unknown} does not exist`,
      });
    }
  });
});

import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, SkippedRange, SkippedRangeStore, SubscriptionEntity } from '@libs/storage';
import { testConfig } from '../support/env';

describe('SkippedRangeStore (real Postgres)', () => {
  let db: DataSource;
  let store: SkippedRangeStore;

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'skipped-range-store-spec');
    await db.initialize();
    store = new SkippedRangeStore(db);
  });
  afterAll(() => db.destroy());

  async function subscription(tenant = 'default'): Promise<string> {
    const id = randomUUID();
    await db.manager.insert(SubscriptionEntity, {
      id,
      tenant,
      topic: 't',
      protocol: 'HTTP',
      sink: 'http://x',
      instanceId: 'i',
      status: 'ACTIVE',
    });
    return id;
  }

  const range = (subscriptionId: string, fromOffset: number, toOffset: number, partition = 1): SkippedRange => ({
    subscriptionId,
    topic: 't',
    partition,
    fromOffset,
    toOffset,
    reason: 'RETENTION',
    epoch: 0,
  });

  it('records a range once: the same range again changes nothing and counts nothing', async () => {
    const id = await subscription();
    expect(await store.record(range(id, 10, 50))).toMatchObject({
      applied: true,
      outcome: 'RECORDED',
      newlySkipped: 40,
    });
    expect(await store.record(range(id, 10, 50))).toMatchObject({
      applied: true,
      outcome: 'ALREADY_RECORDED',
      newlySkipped: 0,
      previousToOffset: 50,
    });
    // A stale writer with a shorter view of the same skip does not shrink it.
    expect(await store.record(range(id, 10, 30))).toMatchObject({
      applied: true,
      outcome: 'ALREADY_RECORDED',
      newlySkipped: 0,
    });
    const ranges = await store.listFor(id, 'default');
    expect(ranges).toHaveLength(1);
    expect(ranges![0]).toMatchObject({ fromOffset: 10, toOffset: 50, events: 40, reason: 'RETENTION' });
  });

  it('extends a range recorded again with a later end, counting only the new events', async () => {
    const id = await subscription();
    await store.record(range(id, 0, 100));
    const again = await store.record({ ...range(id, 0, 130), epoch: 4 });
    expect(again).toMatchObject({ applied: true, outcome: 'EXTENDED', newlySkipped: 30, previousToOffset: 100 });
    expect((await store.listFor(id, 'default'))![0]).toMatchObject({
      fromOffset: 0,
      toOffset: 130,
      events: 130,
      epoch: 4,
    });
  });

  it('refuses an empty range and a deleted subscription, saying why', async () => {
    const id = await subscription();
    expect(await store.record(range(id, 7, 7))).toMatchObject({
      applied: false,
      rejected: 'EMPTY_RANGE',
      newlySkipped: 0,
    });
    const gone = randomUUID();
    expect(await store.record(range(gone, 0, 5))).toMatchObject({
      applied: false,
      rejected: 'SUBSCRIPTION_GONE',
      newlySkipped: 0,
    });
    expect(await store.listFor(id, 'default')).toEqual([]);
  });

  it('writes inside the caller transaction: a rolled-back transaction leaves no record', async () => {
    const id = await subscription();
    await expect(
      db.transaction(async (m) => {
        expect((await store.record(range(id, 3, 9), m)).applied).toBe(true);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await store.listFor(id, 'default')).toEqual([]);
    await db.transaction((m) => store.record(range(id, 3, 9), m));
    expect(await store.listFor(id, 'default')).toHaveLength(1);
  });

  it('lists a subscription by topic, partition and offset; an unknown or malformed id is undefined', async () => {
    const id = await subscription();
    await store.record(range(id, 50, 60, 2));
    await store.record(range(id, 5, 6, 2));
    await store.record(range(id, 0, 1, 0));
    expect((await store.listFor(id, 'default'))!.map((r) => [r.partition, r.fromOffset])).toEqual([
      [0, 0],
      [2, 5],
      [2, 50],
    ]);
    expect(await store.listFor(randomUUID(), 'default')).toBeUndefined();
    expect(await store.listFor('not-a-uuid', 'default')).toBeUndefined();
  });

  it('summarises the skips of a window per subscription, latest first, with the totals', async () => {
    const [{ now }]: { now: Date }[] = await db.query('SELECT now() AS now');
    const a = await subscription();
    const b = await subscription();
    await store.record(range(a, 0, 10, 0));
    await store.record(range(a, 0, 5, 1));
    await store.record(range(b, 100, 103, 0));
    const report = await store.recordedSince(now);
    expect(report.subscriptions).toBe(2);
    expect(report.events).toBe(18);
    expect(report.latest.map((s) => [s.subscriptionId, s.ranges, s.events])).toEqual([
      [b, 1, 3],
      [a, 2, 15],
    ]);
    // The limit shortens the list, not the totals.
    const one = await store.recordedSince(now, 1);
    expect(one).toMatchObject({ subscriptions: 2, events: 18 });
    expect(one.latest).toHaveLength(1);
    expect(await store.recordedSince(new Date(Date.now() + 60_000))).toEqual({
      subscriptions: 0,
      events: 0,
      latest: [],
    });
  });

  it('drops the ranges of a deleted subscription', async () => {
    const id = await subscription();
    await store.record(range(id, 0, 4));
    await db.manager.delete(SubscriptionEntity, { id });
    expect(await db.query('SELECT 1 FROM skipped_ranges WHERE subscription_id = $1', [id])).toEqual([]);
  });

  it("lists a subscription's ranges only to its tenant; to another tenant it does not exist", async () => {
    const id = await subscription('tenant-a');
    await store.record(range(id, 0, 5));
    expect(await store.listFor(id, 'tenant-b')).toBeUndefined();
    expect(await store.listFor(id, 'default')).toBeUndefined();
    expect((await store.listFor(id, 'tenant-a'))!.map((r) => r.toOffset)).toEqual([5]);
  });
});

import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, OffsetStore, SubscriptionEntity } from '@libs/storage';
import { testConfig } from '../support/env';

describe('OffsetStore (real Postgres)', () => {
  let db: DataSource;
  let store: OffsetStore;

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'offset-store-spec');
    await db.initialize();
    store = new OffsetStore(db);
  });
  afterAll(() => db.destroy());

  async function subscription(): Promise<string> {
    const id = randomUUID();
    await db.manager.insert(SubscriptionEntity, {
      id,
      topic: 't',
      protocol: 'HTTP',
      sink: 'http://x',
      instanceId: 'i',
      status: 'ACTIVE',
    });
    return id;
  }

  const at = (subscriptionId: string, nextOffset: number, epoch: number, partition = 0) => ({
    subscriptionId,
    topic: 't',
    partition,
    nextOffset,
    epoch,
    // No operator seek in these cases: the subscription's offsets generation stays 0 (subscription-operations.spec.ts seeks).
    generation: 0,
  });

  async function stored(subscriptionId: string) {
    return (await store.positionsOf([subscriptionId])).sort((a, b) => a.partition - b.partition);
  }

  it('inserts, then moves forward', async () => {
    const id = await subscription();
    expect((await store.commit([at(id, 5, 1)]))[0]).toMatchObject({ applied: true });
    expect((await store.commit([at(id, 9, 1)]))[0]).toMatchObject({
      applied: true,
      current: { nextOffset: 5, epoch: 1 },
    });
    expect(await stored(id)).toEqual([at(id, 9, 1)]);
  });

  it('rejects a write that would move the offset backwards, and changes nothing', async () => {
    const id = await subscription();
    await store.commit([at(id, 10, 1)]);
    const [result] = await store.commit([at(id, 7, 1)]);
    expect(result).toMatchObject({ applied: false, rejected: 'BACKWARDS', current: { nextOffset: 10, epoch: 1 } });
    expect(await stored(id)).toEqual([at(id, 10, 1)]);
  });

  it('rejects a write from an older epoch even when it moves forward, and changes nothing', async () => {
    const id = await subscription();
    await store.commit([at(id, 10, 3)]);
    const [result] = await store.commit([at(id, 50, 2)]);
    expect(result).toMatchObject({ applied: false, rejected: 'STALE_EPOCH', current: { nextOffset: 10, epoch: 3 } });
    expect(await stored(id)).toEqual([at(id, 10, 3)]);
  });

  it('treats epoch 0 (LOCAL_STICKY_PULL) as unfenced: it moves forward past a fenced epoch and keeps that epoch', async () => {
    const id = await subscription();
    await store.commit([at(id, 10, 3)]);
    expect((await store.commit([at(id, 12, 0)]))[0]).toMatchObject({ applied: true });
    expect(await stored(id)).toEqual([at(id, 12, 3)]);
    expect((await store.commit([at(id, 11, 0)]))[0]).toMatchObject({ applied: false, rejected: 'BACKWARDS' });
  });

  it('accepts a newer epoch at the same offset (a takeover resuming where the old owner stopped)', async () => {
    const id = await subscription();
    await store.commit([at(id, 10, 3)]);
    expect((await store.commit([at(id, 10, 4)]))[0].applied).toBe(true);
    expect(await stored(id)).toEqual([at(id, 10, 4)]);
  });

  it('commits a batch in one statement and reports each position on its own', async () => {
    const id = await subscription();
    await store.commit([at(id, 10, 1, 0), at(id, 10, 1, 1)]);
    const results = await store.commit([at(id, 12, 1, 0), at(id, 8, 1, 1), at(id, 3, 1, 2)]);
    expect(results.map((r) => [r.position.partition, r.applied, r.rejected])).toEqual([
      [0, true, undefined],
      [1, false, 'BACKWARDS'],
      [2, true, undefined],
    ]);
    expect(await stored(id)).toEqual([at(id, 12, 1, 0), at(id, 10, 1, 1), at(id, 3, 1, 2)]);
  });

  it('reports a deleted subscription instead of failing the batch', async () => {
    const gone = randomUUID();
    const id = await subscription();
    const results = await store.commit([at(gone, 4, 1), at(id, 4, 1)]);
    expect(results.map((r) => r.rejected ?? 'applied')).toEqual(['SUBSCRIPTION_GONE', 'applied']);
    expect(await stored(gone)).toEqual([]);
  });

  it('refuses a batch that names the same subscription partition twice', async () => {
    const id = await subscription();
    await expect(store.commit([at(id, 1, 1), at(id, 2, 1)])).rejects.toThrow('same subscription partition twice');
  });

  it('keeps the highest offset when writers race', async () => {
    const id = await subscription();
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.commit([at(id, i, 1)])));
    expect(await stored(id)).toEqual([at(id, 19, 1)]);
  });
});

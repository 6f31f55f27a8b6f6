import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, LeaseStore, OffsetStore, SubscriptionEntity } from '@libs/storage';
import { StaleEpochError } from '@libs/fence';
import { testConfig } from '../support/env';
import { waitFor } from '../support/wait-for';

describe('LeaseStore: epochs of PARTITION_OWNED_PULL (real Postgres)', () => {
  let db: DataSource;
  let leases: LeaseStore;
  let offsets: OffsetStore;

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'lease-store-spec');
    await db.initialize();
    leases = new LeaseStore(db);
    offsets = new OffsetStore(db);
  });
  afterAll(() => db.destroy());

  const topic = () => `lease-${randomUUID().slice(0, 8)}`;
  const row = async (t: string) => (await leases.list([t]))[0];

  it('claims only with a higher epoch, or the same owner with its own epoch again', async () => {
    const t = topic();
    expect(await leases.claim(t, 0, 'a', 1)).toEqual({ claimed: true });
    expect(await leases.claim(t, 0, 'a', 1)).toEqual({ claimed: true });
    expect(await leases.claim(t, 0, 'b', 1)).toEqual({ claimed: false, current: 1, owner: 'a' });
    expect(await leases.claim(t, 0, 'b', 2)).toEqual({ claimed: true });
    expect(await leases.claim(t, 0, 'a', 1)).toEqual({ claimed: false, current: 2, owner: 'b' });
    expect(await row(t)).toMatchObject({ owner: 'b', epoch: 2 });
  });

  it('renews under the held epoch, and refuses and counts a renewal under an older one', async () => {
    const t = topic();
    await leases.claim(t, 0, 'a', 1);
    expect(await leases.renew(t, 0, 1)).toBe(true);
    await leases.claim(t, 0, 'b', 2);
    expect(await leases.renew(t, 0, 1)).toBe(false);
    expect(await row(t)).toMatchObject({ epoch: 2, rejectedWrites: 1 });
  });

  it('renews the partitions asked together in one transaction, each answered by its own row (held, stale, or missing)', async () => {
    const batched = new LeaseStore(db, 5000, 100);
    const t = topic();
    for (let p = 0; p < 8; p++) await leases.claim(t, p, 'a', 1);
    await leases.claim(t, 7, 'b', 2);
    const before = await leases.list([t]);
    const transactions = jest.spyOn(db, 'transaction');
    try {
      const answers = await Promise.all([
        ...Array.from({ length: 8 }, (_, p) => batched.renew(t, p, 1)),
        // The newer owner of partition 7 in the same batch, and a partition nobody claimed.
        batched.renew(t, 7, 2),
        batched.renew(t, 8, 1),
      ]);
      expect(answers).toEqual([true, true, true, true, true, true, true, false, true, false]);
      expect(transactions).toHaveBeenCalledTimes(1);
    } finally {
      transactions.mockRestore();
    }
    const after = await leases.list([t]);
    for (let p = 0; p < 8; p++) expect(after[p].renewedAt!.getTime()).toBeGreaterThan(before[p].renewedAt!.getTime());
    expect(after.map((r) => r.rejectedWrites)).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
    // Asked apart: each in a batch of its own.
    expect(await batched.renew(t, 0, 1)).toBe(true);
    const seven = (await leases.list([t]))[7].renewedAt!.getTime();
    expect(await batched.renew(t, 7, 1)).toBe(false);
    // A stale renewal leaves the newer owner's row as it was, but for the count.
    expect((await leases.list([t]))[7].renewedAt!.getTime()).toBe(seven);
    expect((await row(t)).rejectedWrites).toBe(0);
    expect((await leases.list([t]))[7].rejectedWrites).toBe(2);
  });

  it('runs a fenced write only under the held epoch; a stale one changes nothing and is counted', async () => {
    const t = topic();
    const id = randomUUID();
    await db.manager.insert(SubscriptionEntity, {
      id,
      topic: t,
      protocol: 'HTTP',
      sink: 'http://x',
      instanceId: 'i',
      status: 'ACTIVE',
    });
    await leases.claim(t, 0, 'a', 1);
    const stale = leases.fenceFor(t, 0, 1);
    await stale.run((m) =>
      offsets.commit([{ subscriptionId: id, topic: t, partition: 0, nextOffset: 5, epoch: 1 }], m),
    );
    await leases.claim(t, 0, 'b', 2);
    await expect(
      stale.run((m) => offsets.commit([{ subscriptionId: id, topic: t, partition: 0, nextOffset: 9, epoch: 1 }], m)),
    ).rejects.toBeInstanceOf(StaleEpochError);
    expect((await offsets.positionsOf([id]))[0]).toMatchObject({ nextOffset: 5, epoch: 1 });
    expect(await row(t)).toMatchObject({ rejectedWrites: 1 });
    const current = leases.fenceFor(t, 0, 2);
    await current.run((m) =>
      offsets.commit([{ subscriptionId: id, topic: t, partition: 0, nextOffset: 9, epoch: 2 }], m),
    );
    expect((await offsets.positionsOf([id]))[0]).toMatchObject({ nextOffset: 9, epoch: 2 });
  });

  it('makes a claim wait for a fenced write in flight, so the two never interleave', async () => {
    const t = topic();
    await leases.claim(t, 0, 'a', 1);
    let release!: () => void;
    const holding = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const order: string[] = [];
    const write = leases.fenceFor(t, 0, 1).run(async () => {
      entered();
      await holding;
      order.push('write committed');
    });
    await inside;
    const claim = leases.claim(t, 0, 'b', 2).then((r) => order.push(`claim ${r.claimed}`));
    // The claim waits on the row lock the write holds: Postgres shows it waiting, and it has not finished.
    await waitFor('the claim to wait on the lease row lock', async () => {
      const waiting: { n: string }[] = await db.query(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO partition_leases%'`,
      );
      return Number(waiting[0].n) > 0;
    });
    expect(order).toEqual([]);
    release();
    await Promise.all([write, claim]);
    expect(order).toEqual(['write committed', 'claim true']);
  });
});

import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, DeadLetterStore, ParkedDelivery, RetryStore, SubscriptionEntity } from '@libs/storage';
import { testConfig } from '../support/env';

describe('RetryStore (real Postgres)', () => {
  let db: DataSource;
  let deadLetters: DeadLetterStore;
  let retries: RetryStore;

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'retry-store-spec');
    await db.initialize();
    deadLetters = new DeadLetterStore(db);
    retries = new RetryStore(db, deadLetters);
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

  const parked = (subscriptionId: string, offset: number, dueInMs: number): ParkedDelivery => ({
    subscriptionId,
    topic: 't',
    partition: 2,
    offset,
    attributes: { id: `e-${offset}`, source: '/s', type: 't', specversion: '1.0' },
    data: Buffer.from([0, 1, 2]),
    attempts: 3,
    lastError: 'HTTP 503',
    firstFailedAt: new Date(),
    nextAttemptAt: new Date(Date.now() + dueInMs),
    epoch: 0,
  });

  it('returns only due deliveries, oldest first, with their bytes intact', async () => {
    const id = await subscription();
    await retries.park(parked(id, 1, -2000));
    await retries.park(parked(id, 2, -1000));
    await retries.park(parked(id, 3, 60000));
    const due = await retries.due([id], 10);
    expect(due.map((d) => d.offset)).toEqual([1, 2]);
    expect(due[0].data).toEqual(Buffer.from([0, 1, 2]));
    expect(due[0].attributes).toMatchObject({ id: 'e-1' });
  });

  it('takes at most a few of each subscription per sweep, so one backlog does not crowd out the others', async () => {
    const busy = await subscription();
    const quiet = await subscription();
    for (let offset = 0; offset < 20; offset++) await retries.park(parked(busy, offset, -5000 + offset));
    await retries.park(parked(quiet, 0, -1));
    const due = await retries.due([busy, quiet], 10, 4);
    expect(due.filter((d) => d.subscriptionId === busy).map((d) => d.offset)).toEqual([0, 1, 2, 3]);
    expect(due.filter((d) => d.subscriptionId === quiet)).toHaveLength(1);
  });

  it('keeps the first parking of a delivery parked twice (a redelivery after a crash)', async () => {
    const id = await subscription();
    await retries.park(parked(id, 7, -1000));
    await retries.park({ ...parked(id, 7, -1000), attempts: 9 });
    const [only] = await retries.due([id], 10);
    expect(only.attempts).toBe(3);
    expect(await retries.countFor(id)).toBe(1);
  });

  it('parks up to the cap of a subscription and refuses more, saying so; other subscriptions are not held back', async () => {
    const id = await subscription();
    const other = await subscription();
    for (let offset = 0; offset < 3; offset++) {
      expect(await retries.park(parked(id, offset, 1000), undefined, 3)).toMatchObject({
        applied: true,
        outcome: 'PARKED',
        parked: offset + 1,
      });
    }
    expect(await retries.park(parked(id, 3, 1000), undefined, 3)).toMatchObject({
      applied: false,
      rejected: 'AT_CAP',
      parked: 3,
    });
    // A redelivery of one already parked is no new row: it stands, even at the cap.
    expect(await retries.park(parked(id, 1, 1000), undefined, 3)).toMatchObject({
      applied: true,
      outcome: 'ALREADY_PARKED',
    });
    expect(await retries.park(parked(other, 0, 1000), undefined, 3)).toMatchObject({
      applied: true,
      outcome: 'PARKED',
    });
    expect(await retries.countFor(id)).toBe(3);
    // Room again once one leaves the table.
    await retries.delivered(parked(id, 0, 0));
    expect(await retries.park(parked(id, 3, 1000), undefined, 3)).toMatchObject({
      applied: true,
      outcome: 'PARKED',
      parked: 3,
    });
  });

  it('holds the cap under concurrent parks of one subscription (many lanes failing at once)', async () => {
    const id = await subscription();
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) => retries.park({ ...parked(id, i, 1000), partition: i % 6 }, undefined, 5)),
    );
    expect(results.filter((r) => r.applied)).toHaveLength(5);
    expect(results.filter((r) => r.rejected === 'AT_CAP')).toHaveLength(19);
    expect(await retries.countFor(id)).toBe(5);
  });

  it('refuses to park for a deleted subscription, saying why', async () => {
    const id = await subscription();
    await db.manager.delete(SubscriptionEntity, { id });
    expect(await retries.park(parked(id, 1, 0), undefined, 10)).toMatchObject({
      applied: false,
      rejected: 'SUBSCRIPTION_GONE',
    });
    expect(await retries.park(parked(id, 1, 0))).toMatchObject({ applied: false, rejected: 'SUBSCRIPTION_GONE' });
  });

  it('parks inside the caller transaction: a rolled-back transaction leaves nothing parked', async () => {
    const id = await subscription();
    await expect(
      db.transaction(async (m) => {
        expect((await retries.park(parked(id, 1, 0), m, 10)).applied).toBe(true);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await retries.countFor(id)).toBe(0);
  });

  it('reads the backlog of a subscription partition in offset order, due or not', async () => {
    const id = await subscription();
    // Parked out of offset order, with later events due earlier.
    for (const [offset, due] of [
      [9, -5000],
      [2, 60000],
      [5, -1],
    ] as const)
      await retries.park(parked(id, offset, due));
    await retries.park({ ...parked(id, 1, -1), partition: 3 });
    const lane = { subscriptionId: id, topic: 't', partition: 2 };
    expect((await retries.backlogOf(lane, 10)).map((d) => d.offset)).toEqual([2, 5, 9]);
    expect((await retries.backlogOf(lane, 2)).map((d) => d.offset)).toEqual([2, 5]);
    expect((await retries.backlogOf(lane, 10, 5)).map((d) => d.offset)).toEqual([9]);
    expect((await retries.backlogOf(lane, 10))[0].data).toEqual(Buffer.from([0, 1, 2]));
  });

  it('reschedules, and forgets a delivered one', async () => {
    const id = await subscription();
    await retries.park(parked(id, 1, -1000));
    await retries.reschedule(parked(id, 1, 0), 4, new Date(Date.now() + 60000), 'timeout');
    expect(await retries.due([id], 10)).toEqual([]);
    await retries.delivered(parked(id, 1, 0));
    expect(await retries.countFor(id)).toBe(0);
  });

  it("moves a delivery to the dead-letter queue in one step, both rows of the subscription's tenant", async () => {
    const id = await subscription('tenant-a');
    await retries.park(parked(id, 5, -1000));
    const tenantOf = async (table: string) =>
      ((await db.query(`SELECT tenant FROM ${table} WHERE subscription_id = $1`, [id])) as { tenant: string }[]).map(
        (r) => r.tenant,
      );
    expect(await tenantOf('delivery_retries')).toEqual(['tenant-a']);
    await retries.deadLetter({
      subscriptionId: id,
      topic: 't',
      partition: 2,
      offset: 5,
      eventId: 'e-5',
      attributes: { id: 'e-5' },
      data: Buffer.from('x'),
      attempts: 10,
      lastError: 'HTTP 500',
      firstFailedAt: new Date(),
      lastFailedAt: new Date(),
    });
    expect(await retries.countFor(id)).toBe(0);
    expect(await deadLetters.listFor(id, 'default')).toEqual([]);
    const [letter] = await deadLetters.listFor(id, 'tenant-a');
    expect(letter).toMatchObject({
      tenant: 'tenant-a',
      position: { topic: 't', partition: 2, offset: 5 },
      eventId: 'e-5',
      attempts: 10,
      lastError: 'HTTP 500',
    });
  });

  it('forgets, per position, the parked deliveries at or after it, in one statement', async () => {
    const id = await subscription();
    for (const offset of [3, 4, 5]) await retries.park(parked(id, offset, -1000));
    await retries.forgetReplayed([{ subscriptionId: id, topic: 't', partition: 2, nextOffset: 4 }]);
    expect((await retries.due([id], 10)).map((d) => d.offset)).toEqual([3]);
  });

  it('drops the parked deliveries of a deleted subscription', async () => {
    const id = await subscription();
    await retries.park(parked(id, 1, -1000));
    await db.manager.delete(SubscriptionEntity, { id });
    expect(await retries.countFor(id)).toBe(0);
  });
});

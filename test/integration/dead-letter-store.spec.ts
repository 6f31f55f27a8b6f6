import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, DeadLetter, DeadLetterStore, RetryStore, SubscriptionEntity } from '@libs/storage';
import { DeadLetterPositionKey1796101550983 } from '@libs/storage/migrations/1796101550983-DeadLetterPositionKey';
import { testConfig } from '../support/env';

describe('DeadLetterStore (real Postgres)', () => {
  let db: DataSource;
  let deadLetters: DeadLetterStore;
  let retries: RetryStore;

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'dead-letter-store-spec');
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

  const letter = (subscriptionId: string, offset: number, overrides: Partial<DeadLetter> = {}): DeadLetter => ({
    subscriptionId,
    topic: 't',
    partition: 1,
    offset,
    eventId: `e-${offset}`,
    attributes: { id: `e-${offset}`, source: '/s', type: 't', specversion: '1.0' },
    data: Buffer.from([0, 1, 2]),
    attempts: 10,
    lastError: 'HTTP 503',
    firstFailedAt: new Date(Date.now() - 60000),
    lastFailedAt: new Date(),
    ...overrides,
  });

  const rowsOf = async (id: string) =>
    Number((await db.query(`SELECT count(*) AS n FROM dead_letters WHERE subscription_id = $1`, [id]))[0].n);

  it('writes the same letter twice (a replay after a crash) as one row, keeping the first', async () => {
    const id = await subscription();
    const first = await deadLetters.add([letter(id, 7)]);
    const again = await deadLetters.add([letter(id, 7, { attempts: 3, lastError: 'replayed' })]);
    expect(first).toEqual([{ position: { subscriptionId: id, topic: 't', partition: 1, offset: 7 }, written: true }]);
    expect(again).toEqual([
      {
        position: { subscriptionId: id, topic: 't', partition: 1, offset: 7 },
        written: false,
        rejected: 'ALREADY_DEAD_LETTERED',
      },
    ]);
    expect(await rowsOf(id)).toBe(1);
    const [kept] = await deadLetters.listFor(id, 'default');
    expect(kept).toMatchObject({
      position: { topic: 't', partition: 1, offset: 7 },
      attempts: 10,
      lastError: 'HTTP 503',
      eventId: 'e-7',
    });
    expect(kept.data).toEqual(Buffer.from([0, 1, 2]));
    expect(kept.attributes).toEqual({ id: 'e-7', source: '/s', type: 't', specversion: '1.0' });
  });

  it('writes a batch in one call, a position repeated inside it once, and other positions apart', async () => {
    const id = await subscription();
    const results = await deadLetters.add([
      letter(id, 1),
      letter(id, 2, { data: null }),
      letter(id, 1),
      letter(id, 1, { partition: 2 }),
    ]);
    expect(results.map((r) => r.written)).toEqual([true, true, false, true]);
    expect(results[2].rejected).toBe('ALREADY_DEAD_LETTERED');
    expect(await rowsOf(id)).toBe(3);
    expect((await deadLetters.listFor(id, 'default')).find((l) => l.position.offset === 2)?.data).toBeNull();
  });

  it('moves a parked delivery to the queue once, even when the move is replayed', async () => {
    const id = await subscription();
    const parked = {
      subscriptionId: id,
      topic: 't',
      partition: 1,
      offset: 4,
      attributes: { id: 'e-4' },
      data: null,
      attempts: 3,
      lastError: 'x',
      firstFailedAt: new Date(),
      nextAttemptAt: new Date(),
      epoch: 0,
    };
    await retries.park(parked);
    await retries.deadLetter(letter(id, 4));
    // The sweep's first move committed, then the process died before the lane learned of it; the delivery
    // was parked again on replay and fails for the last time again.
    await retries.park(parked);
    await retries.deadLetter(letter(id, 4, { lastError: 'second' }));
    expect(await retries.countFor(id)).toBe(0);
    expect((await deadLetters.listFor(id, 'default')).map((l) => l.lastError)).toEqual(['HTTP 503']);
  });

  it("writes each letter with its subscription's tenant, and lists it only to that tenant", async () => {
    const a = await subscription('tenant-a');
    const b = await subscription('tenant-b');
    await deadLetters.add([letter(a, 1), letter(b, 1)]);
    const tenants: { subscription_id: string; tenant: string }[] = await db.query(
      `SELECT subscription_id, tenant FROM dead_letters WHERE subscription_id = ANY($1::uuid[])`,
      [[a, b]],
    );
    expect(Object.fromEntries(tenants.map((r) => [r.subscription_id, r.tenant]))).toEqual({
      [a]: 'tenant-a',
      [b]: 'tenant-b',
    });
    expect(await deadLetters.listFor(a, 'tenant-b')).toEqual([]);
    expect((await deadLetters.listFor(a, 'tenant-a')).map((l) => l.tenant)).toEqual(['tenant-a']);
  });

  it('refuses a letter of a deleted subscription, and deletes the letters with their subscription', async () => {
    const gone = randomUUID();
    const [refused] = await deadLetters.add([letter(gone, 1)]);
    expect(refused).toMatchObject({ written: false, rejected: 'SUBSCRIPTION_GONE' });
    expect(await rowsOf(gone)).toBe(0);

    const id = await subscription();
    const kept = await subscription();
    await deadLetters.add([letter(id, 1), letter(id, 2), letter(kept, 1)]);
    await db.manager.delete(SubscriptionEntity, { id });
    expect(await rowsOf(id)).toBe(0);
    expect(await rowsOf(kept)).toBe(1);
  });

  it('answers, for many lane starts in one statement, the dead-lettered offsets at or after each', async () => {
    const a = await subscription();
    const b = await subscription();
    await deadLetters.add([
      letter(a, 3),
      letter(a, 5),
      letter(a, 9),
      letter(a, 6, { partition: 2 }),
      letter(b, 1),
      letter(b, 8),
    ]);
    const found = await deadLetters.deadLetteredFrom([
      { subscriptionId: a, topic: 't', partition: 1, nextOffset: 5 },
      { subscriptionId: a, topic: 't', partition: 2, nextOffset: 7 },
      { subscriptionId: b, topic: 't', partition: 1, nextOffset: 0 },
      { subscriptionId: b, topic: 'other', partition: 1, nextOffset: 0 },
    ]);
    const strip = (p: { subscriptionId: string; partition: number; offset: number }) => [
      p.subscriptionId === a ? 'a' : 'b',
      p.partition,
      p.offset,
    ];
    expect(found.map(strip).sort()).toEqual(
      [
        ['a', 1, 5],
        ['a', 1, 9],
        ['b', 1, 1],
        ['b', 1, 8],
      ].sort(),
    );
    expect(await deadLetters.deadLetteredFrom([])).toEqual([]);
  });

  it('purges letters older than the cutoff in bounded batches, and nothing newer', async () => {
    const id = await subscription();
    await deadLetters.add([1, 2, 3, 4, 5].map((o) => letter(id, o)));
    await db.query(
      `UPDATE dead_letters SET created_at = now() - interval '40 days' WHERE subscription_id = $1 AND kafka_offset <= 3`,
      [id],
    );
    const cutoff = new Date(Date.now() - 30 * 86400000);
    // Other tests' letters are all new; only these three are older than the cutoff.
    expect(await deadLetters.purgeOlderThan(cutoff, 2)).toBe(2);
    expect(await deadLetters.purgeOlderThan(cutoff, 2)).toBe(1);
    expect(await deadLetters.purgeOlderThan(cutoff, 2)).toBe(0);
    expect((await deadLetters.listFor(id, 'default')).map((l) => l.position.offset)).toEqual([4, 5]);
  });

  it('migration: keeps the earliest of duplicate letters and drops orphans before adding the key', async () => {
    const runner = db.createQueryRunner();
    await runner.connect();
    // DDL is transactional in Postgres: the schema is back as it was after the rollback.
    await runner.startTransaction();
    try {
      const migration = new DeadLetterPositionKey1796101550983();
      await migration.down(runner);
      const id = randomUUID();
      await runner.query(
        `INSERT INTO subscriptions (id, topic, protocol, sink, instance_id, status) VALUES ($1, 't', 'HTTP', 'http://x', 'i', 'ACTIVE')`,
        [id],
      );
      const insert = (sub: string, offset: number, error: string, age: string) =>
        runner.query(
          `INSERT INTO dead_letters (subscription_id, topic, partition, kafka_offset, event_id, attributes, data, attempts, last_error, first_failed_at, last_failed_at, created_at)
           VALUES ($1, 't', 0, $2, 'e', '{}', NULL, 1, $3, now(), now(), now() - $4::interval)`,
          [sub, offset, error, age],
        );
      await insert(id, 1, 'second', '1 minute');
      await insert(id, 1, 'first', '2 minutes');
      await insert(id, 1, 'third', '0 minutes');
      await insert(id, 2, 'only', '0 minutes');
      await insert(randomUUID(), 1, 'orphan', '0 minutes');
      await migration.up(runner);
      const rows: { kafka_offset: string; last_error: string }[] = await runner.query(
        `SELECT kafka_offset, last_error FROM dead_letters WHERE last_error IN ('first', 'second', 'third', 'only', 'orphan') ORDER BY kafka_offset`,
      );
      expect(rows).toEqual([
        { kafka_offset: '1', last_error: 'first' },
        { kafka_offset: '2', last_error: 'only' },
      ]);
      await expect(insert(id, 2, 'again', '0 minutes')).rejects.toThrow(/dead_letters_position_key/);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });
});

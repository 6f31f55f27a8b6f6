import { randomUUID } from 'node:crypto';
import type { DataSource, QueryRunner } from 'typeorm';
import { createDataSource, DispatchRunStore, OffsetStore, PlacementStore } from '@libs/storage';
import { StaleEpochError } from '@libs/fence';
import { testConfig, uniqueTopic } from '../support/env';

/**
 * Orphaned subscriptions of LOCAL_STICKY_PULL and their moves, on Postgres: what counts as an orphan, that a move
 * fences the old instance's dispatch run in the same transaction, and that two movers never both win.
 */
describe('PlacementStore: orphans and fenced moves (real Postgres)', () => {
  const GRACE = 10_000;
  let db: DataSource;
  let store: PlacementStore;

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'placement-store-spec');
    await db.initialize();
    // Short lock waits, so a round that waits on a held row fails the test quickly instead of hanging.
    store = new PlacementStore(db, 2000);
  });
  afterAll(() => db.destroy());

  const instance = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

  /** A dispatch run row, last renewed `agoMs` ago (null: never renewed). */
  const run = async (instanceId: string, agoMs: number | null, epoch = 1) => {
    await db.query(
      `INSERT INTO dispatch_runs (instance_id, epoch, owner, claimed_at, renewed_at)
       VALUES ($1, $2, 'test', now(), CASE WHEN $3::bigint IS NULL THEN NULL ELSE now() - $3::bigint * interval '1 millisecond' END)`,
      [instanceId, epoch, agoMs],
    );
  };

  /** A subscription pinned to `instanceId`, created (or last moved) `agoMs` ago. */
  const subscription = async (instanceId: string, topic: string, agoMs: number, status = 'ACTIVE') => {
    const id = randomUUID();
    await db.query(
      `INSERT INTO subscriptions (id, topic, protocol, sink, instance_id, status, created_at, updated_at)
       VALUES ($1, $2, 'HTTP', 'http://127.0.0.1:9/hook', $3, $4, now() - $5::bigint * interval '1 millisecond', now() - $5::bigint * interval '1 millisecond')`,
      [id, topic, instanceId, status, agoMs],
    );
    return id;
  };

  const pinnedTo = async (id: string) =>
    ((await db.query(`SELECT instance_id FROM subscriptions WHERE id = $1`, [id])) as { instance_id: string }[])[0]
      .instance_id;
  const epochOf = async (instanceId: string) =>
    Number(
      (
        (await db.query(`SELECT epoch FROM dispatch_runs WHERE instance_id = $1`, [instanceId])) as { epoch: string }[]
      )[0]?.epoch,
    );

  /** A transaction of another session holding `sql`'s row locks until released. */
  const hold = async (sql: string, params: unknown[]): Promise<QueryRunner> => {
    const runner = db.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    await runner.query(sql, params);
    return runner;
  };
  const release = async (runner: QueryRunner) => {
    await runner.rollbackTransaction();
    await runner.release();
  };

  it('counts as orphans exactly the active subscriptions whose instance showed no life within the grace', async () => {
    const topic = uniqueTopic('orphans');
    const [dead, live, never, fresh] = [instance('dead'), instance('live'), instance('never'), instance('fresh')];
    await run(dead, 60_000);
    await run(live, 0);
    // Older than the run's last renewal: that renewal is its last sign of life.
    const ofDead = await subscription(dead, topic, 90_000);
    await subscription(dead, topic, 90_000, 'DISABLED');
    // Moved to the dead instance a moment ago: it gets its grace too.
    await subscription(dead, topic, 0);
    await subscription(live, topic, 60_000);
    const ofNever = await subscription(never, topic, 60_000);
    await subscription(fresh, topic, 1_000);

    const mine = (await store.orphans(GRACE)).filter((o) => o.topic === topic);
    expect(mine.map((o) => [o.subscriptionId, o.instanceId]).sort()).toEqual(
      [
        [ofDead, dead],
        [ofNever, never],
      ].sort(),
    );
    const deadRow = mine.find((o) => o.instanceId === dead)!;
    expect(deadRow.lastRenewedAt).not.toBeNull();
    expect(deadRow.orphanedSince.getTime() - deadRow.lastRenewedAt!.getTime()).toBe(GRACE);
    expect(mine.find((o) => o.instanceId === never)!.lastRenewedAt).toBeNull();
    expect(await store.liveInstances(GRACE)).toContain(live);
    expect(await store.liveInstances(GRACE)).not.toContain(dead);
  });

  it("moves a subscription and takes the next epoch of the old instance's dispatch run in the same transaction", async () => {
    const topic = uniqueTopic('move');
    const [a, b] = [instance('a'), instance('b')];
    await run(a, 0, 3);
    await run(b, 0);
    const id = await subscription(a, topic, 60_000);
    const result = await store.move(id, a, b, { graceMs: GRACE, force: false });
    expect(result).toEqual({ moved: true, move: { subscriptionId: id, from: a, to: b, fencedEpoch: 4 } });
    expect(await pinnedTo(id)).toBe(b);
    expect(await epochOf(a)).toBe(4);
    expect(await epochOf(b)).toBe(1);
  });

  it("refuses, after a move, every write of the old instance's run under its old epoch", async () => {
    const topic = uniqueTopic('fenced');
    const [a, b] = [instance('a'), instance('b')];
    const runs = new DispatchRunStore(db, 2000);
    const offsets = new OffsetStore(db);
    const epoch = await runs.claim(a, 'a@test');
    await run(b, 0);
    const id = await subscription(a, topic, 60_000);
    const commit = (nextOffset: number) => (m: Parameters<OffsetStore['commit']>[1]) =>
      offsets.commit([{ subscriptionId: id, topic, partition: 0, nextOffset, epoch }], m);
    const stale = runs.fenceFor(a, epoch);
    await stale.run(commit(5));

    const moved = await store.move(id, a, b, { graceMs: GRACE, force: false });
    expect(moved.moved).toBe(true);
    // A's loop, still running under its old epoch, can no longer write the moved subscription's offsets.
    await expect(stale.run(commit(9))).rejects.toBeInstanceOf(StaleEpochError);
    expect((await offsets.positionsOf([id]))[0]).toMatchObject({ nextOffset: 5 });
    expect(moved).toMatchObject({ move: { fencedEpoch: epoch + 1 } });
    expect(await runs.get(a)).toMatchObject({ epoch: epoch + 1, rejectedWrites: 1 });
  });

  it('refuses, changing nothing, a move to an instance with no live dispatch run unless forced', async () => {
    const topic = uniqueTopic('move');
    const [a, gone, unknown] = [instance('a'), instance('gone'), instance('unknown')];
    await run(a, 0, 2);
    await run(gone, 60_000);
    const id = await subscription(a, topic, 60_000);
    for (const to of [gone, unknown]) {
      expect(await store.move(id, a, to, { graceMs: GRACE, force: false })).toEqual({
        moved: false,
        rejected: 'TARGET_NOT_LIVE',
        current: a,
      });
    }
    expect(await pinnedTo(id)).toBe(a);
    expect(await epochOf(a)).toBe(2);
    expect(await store.move(id, a, unknown, { graceMs: GRACE, force: true })).toMatchObject({
      moved: true,
      move: { fencedEpoch: 3 },
    });
    expect(await pinnedTo(id)).toBe(unknown);
    expect(await store.move(randomUUID(), a, unknown, { graceMs: GRACE, force: true })).toEqual({
      moved: false,
      rejected: 'SUBSCRIPTION_GONE',
    });
    expect(await epochOf(a)).toBe(3);
  });

  it('lets only one of two concurrent movers of a subscription win; the other changes nothing', async () => {
    const topic = uniqueTopic('race');
    const [a, b, c] = [instance('a'), instance('b'), instance('c')];
    await run(a, 60_000, 5);
    await run(b, 0);
    await run(c, 0);
    const id = await subscription(a, topic, 60_000);
    const results = await Promise.all([b, c].map((to) => store.move(id, a, to, { graceMs: GRACE, force: false })));
    const winners = results.filter((r) => r.moved);
    const losers = results.filter((r) => !r.moved);
    expect(winners).toHaveLength(1);
    const winner = winners[0].moved ? winners[0].move.to : undefined;
    expect(losers).toEqual([{ moved: false, rejected: 'MOVED_CONCURRENTLY', current: winner }]);
    expect(await pinnedTo(id)).toBe(winner);
    // Only the winner's fence stayed: the loser's rolled back with its transaction.
    expect(await epochOf(a)).toBe(6);
  });

  it("takes up to its share of other instances' orphans on its topics, fencing each old run once per move", async () => {
    const topic = uniqueTopic('take');
    const other = uniqueTopic('take-other');
    const [dead, never, me] = [instance('dead'), instance('never'), instance('me')];
    await run(dead, 60_000, 7);
    await run(me, 0);
    const ofDead = [await subscription(dead, topic, 60_000), await subscription(dead, topic, 50_000)];
    const ofNever = await subscription(never, topic, 40_000);
    const elsewhere = await subscription(dead, other, 60_000);

    const first = await store.takeOrphans(me, [topic], GRACE, 2);
    expect(first.moves).toEqual(
      ofDead.map((subscriptionId) => ({ subscriptionId, from: dead, to: me, fencedEpoch: 8 })),
    );
    const second = await store.takeOrphans(me, [topic], GRACE, 2);
    // An instance that never ran gets a dispatch run row at its first fence.
    expect(second.moves).toEqual([{ subscriptionId: ofNever, from: never, to: me, fencedEpoch: 1 }]);
    expect(await epochOf(never)).toBe(1);
    expect(await pinnedTo(elsewhere)).toBe(dead);
    expect((await store.takeOrphans(me, [topic], GRACE, 2)).moves).toEqual([]);
  });

  it('never lets two survivors take the same orphan in concurrent rounds', async () => {
    const topic = uniqueTopic('survivors');
    const [dead, b, c] = [instance('dead'), instance('b'), instance('c')];
    await run(dead, 60_000, 1);
    await run(b, 0);
    await run(c, 0);
    const orphans = await Promise.all(Array.from({ length: 6 }, (_, n) => subscription(dead, topic, 60_000 - n)));
    const taken: string[] = [];
    for (let round = 0; round < 4 && taken.length < orphans.length; round++) {
      const results = await Promise.all([b, c].map((to) => store.takeOrphans(to, [topic], GRACE, 3)));
      for (const r of results) taken.push(...r.moves.map((m) => m.subscriptionId));
    }
    expect(taken.sort()).toEqual([...orphans].sort());
    for (const id of orphans) expect([b, c]).toContain(await pinnedTo(id));
  });

  it('leaves for a later round, without waiting, an instance whose dispatch run row someone holds', async () => {
    const topic = uniqueTopic('held');
    const [dead, me] = [instance('dead'), instance('me')];
    await run(dead, 60_000, 2);
    await run(me, 0);
    const id = await subscription(dead, topic, 60_000);
    // A fenced write of that run in flight (it locks the row FOR SHARE), or another mover.
    const writer = await hold(`SELECT epoch FROM dispatch_runs WHERE instance_id = $1 FOR SHARE`, [dead]);
    try {
      expect(await store.takeOrphans(me, [topic], GRACE, 5)).toEqual({ moves: [], skippedInstances: [dead] });
      expect(await pinnedTo(id)).toBe(dead);
    } finally {
      await release(writer);
    }
    expect((await store.takeOrphans(me, [topic], GRACE, 5)).moves).toEqual([
      { subscriptionId: id, from: dead, to: me, fencedEpoch: 3 },
    ]);
  });

  it('skips a subscription row someone holds and takes the others', async () => {
    const topic = uniqueTopic('held-row');
    const [dead, me] = [instance('dead'), instance('me')];
    await run(dead, 60_000, 1);
    await run(me, 0);
    const busy = await subscription(dead, topic, 60_000);
    const free = await subscription(dead, topic, 50_000);
    // An operator's replace (PUT) of that subscription in flight.
    const replace = await hold(`UPDATE subscriptions SET sink = sink WHERE id = $1`, [busy]);
    try {
      expect((await store.takeOrphans(me, [topic], GRACE, 5)).moves.map((m) => m.subscriptionId)).toEqual([free]);
    } finally {
      await release(replace);
    }
    expect(await pinnedTo(busy)).toBe(dead);
  });
});

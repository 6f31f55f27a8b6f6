import type { DataSource } from 'typeorm';
import {
  createDataSource,
  createPostgresClient,
  isPostgresUnavailable,
  poolLeakDetectorOf,
  POSTGRES_DEADLINE_GRACE_MS,
  POSTGRES_IDLE_PROBE_AFTER_MS,
  POSTGRES_PROBE_TIMEOUT_MS,
  QueryDeadlineError,
} from '@libs/storage';
import { FaultProxy } from '../faults/fault-proxy';
import { testConfig } from '../support/env';
import { waitFor } from '../support/wait-for';

/**
 * The runtime's Postgres connections on a dead link (real Postgres behind a fault proxy that black-holes the open
 * connections, no RST): a query has a deadline, its connection is dropped, and the pool goes on with new ones.
 */
describe('Postgres connections: a deadline on every query (real Postgres, black-holed link)', () => {
  const pg = testConfig().postgres;
  let proxy: FaultProxy;
  let db: DataSource | undefined;

  beforeEach(async () => {
    proxy = new FaultProxy(pg.host, pg.port);
    await proxy.start();
  });
  afterEach(async () => {
    // A query still waiting on the dead link would keep destroy() waiting: the proxy goes first.
    await proxy.stop();
    await db?.destroy().catch(() => undefined);
    db = undefined;
  });

  it('rejects a statement sent into a black-holed connection at its deadline, drops that connection, and the pool serves the next query', async () => {
    db = createDataSource({ ...pg, port: proxy.port, poolSize: 1, queryTimeoutMs: 1000 }, 'postgres-connection-spec');
    await db.initialize();
    await db.query('SELECT 1');
    const connectionsBefore = proxy.counters.connections;
    proxy.strand();
    const sentAt = Date.now();
    const failure = await db.query('SELECT 1').then(
      () => undefined,
      (e: unknown) => e,
    );
    const tookMs = Date.now() - sentAt;
    expect((failure as { driverError?: unknown })?.driverError).toBeInstanceOf(QueryDeadlineError);
    // The deadline that fired, by the runtime's own account: the query timeout and the grace.
    expect((failure as { driverError: Error }).driverError.message).toContain(
      `within ${1000 + POSTGRES_DEADLINE_GRACE_MS} ms`,
    );
    expect(isPostgresUnavailable(failure)).toBe(true);
    // At the deadline is the promise, so it is timed. A timer cannot fire early; the margin above it is for a
    // loaded 2-core host running the pool, the proxy and the deadline's timer in this one process. Without the
    // deadline the statement would wait for good on the dead link.
    expect(tookMs).toBeGreaterThanOrEqual(1000 + POSTGRES_DEADLINE_GRACE_MS - 50);
    expect(tookMs).toBeLessThan(1000 + POSTGRES_DEADLINE_GRACE_MS + 1500);
    // The pool's only connection was the dead one: the next query needs (and gets) a new one through the proxy,
    // without waiting out a deadline or a probe (2 s each, on a dead link); it typically takes milliseconds.
    const nextAt = Date.now();
    expect(await db.query('SELECT 7 AS n')).toEqual([{ n: 7 }]);
    expect(Date.now() - nextAt).toBeLessThan(Math.min(POSTGRES_PROBE_TIMEOUT_MS, 1000 + POSTGRES_DEADLINE_GRACE_MS));
    expect(proxy.counters.connections).toBe(connectionsBefore + 1);
    expect(proxy.strandedOpen).toBe(0);
  }, 60000);

  it("once one connection misses its deadline, drops the pool's other dead connections within a probe, so the next queries do not each wait out a deadline", async () => {
    db = createDataSource(
      { ...pg, port: proxy.port, poolSize: 3, queryTimeoutMs: 1000 },
      'postgres-connection-spec-probe',
    );
    await db.initialize();
    // Three connections open and idle in the pool.
    await Promise.all([1, 2, 3].map(() => db!.query('SELECT pg_sleep(0.1)')));
    expect(proxy.state.open).toBe(3);
    proxy.strand();
    const failure = await db.query('SELECT 1').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((failure as { driverError?: unknown })?.driverError).toBeInstanceOf(QueryDeadlineError);
    const failedAt = Date.now();
    // The idle ones are probed at once and dropped after the probe deadline (2 s here), not after the pool's idle
    // timeout (10 s) or one by one as each is lent again. The probe deadline is the promise: the 1 s margin is for a
    // loaded host's late timers (hundreds of ms), and stays far below the 10 s a missing probe would take.
    await waitFor("the pool's other dead connections dropped", () => proxy.strandedOpen === 0, {
      timeoutMs: POSTGRES_PROBE_TIMEOUT_MS + 1000,
      intervalMs: 50,
    });
    const droppedMs = Date.now() - failedAt;
    // The next queries do not each wait out a deadline (nor a probe): each is answered in less than one, where a
    // query lent a dead connection would take at least that; typically in milliseconds.
    for (const n of [1, 2, 3]) {
      const sentAt = Date.now();
      expect(await db.query(`SELECT ${n} AS n`)).toEqual([{ n }]);
      expect(Date.now() - sentAt).toBeLessThan(Math.min(POSTGRES_PROBE_TIMEOUT_MS, 1000 + POSTGRES_DEADLINE_GRACE_MS));
    }
    process.stdout.write(
      `postgres-connection.spec: the pool's 2 other dead connections dropped ${droppedMs} ms after the first deadline\n`,
    );
  }, 60000);

  it('probes a connection idle past the idle window before its statement: a dead one fails at the probe deadline, not the query deadline', async () => {
    db = createDataSource(
      { ...pg, port: proxy.port, poolSize: 1, queryTimeoutMs: 5000 },
      'postgres-connection-spec-idle',
    );
    await db.initialize();
    await db.query('SELECT 1');
    const idleSince = Date.now();
    await waitFor(
      'the connection idle past the window',
      () => Date.now() - idleSince > POSTGRES_IDLE_PROBE_AFTER_MS + 100,
      { timeoutMs: 60000, intervalMs: 50 },
    );
    proxy.strand();
    // The pool lends its only (dead) connection before any deadline has fired: nothing else would find it dead.
    const sentAt = Date.now();
    const failure = await db.query('SELECT 1').then(
      () => undefined,
      (e: unknown) => e,
    );
    const tookMs = Date.now() - sentAt;
    expect(isPostgresUnavailable(failure)).toBe(true);
    expect(tookMs).toBeGreaterThanOrEqual(POSTGRES_PROBE_TIMEOUT_MS - 50);
    // At the probe deadline is the promise, so it is timed; the margin, as above, is for a loaded host's timers, and
    // stays far from the query deadline, which would be 5000 + 1000 ms.
    expect(tookMs).toBeLessThan(POSTGRES_PROBE_TIMEOUT_MS + 1500);
    expect(await db.query('SELECT 7 AS n')).toEqual([{ n: 7 }]);
    expect(proxy.strandedOpen).toBe(0);
  }, 120000);

  it("fails a transaction whose statement went into the dead link, and the server ends the abandoned session's transaction", async () => {
    db = createDataSource(
      { ...pg, port: proxy.port, poolSize: 2, queryTimeoutMs: 1000 },
      'postgres-connection-spec-tx',
    );
    await db.initialize();
    let inTransaction!: () => void;
    let linkDead!: () => void;
    const begun = new Promise<void>((r) => (inTransaction = r));
    const dead = new Promise<void>((r) => (linkDead = r));
    const tx = db
      .transaction(async (m) => {
        await m.query('SELECT pg_advisory_xact_lock(424242)');
        inTransaction();
        await dead;
        await m.query('SELECT 1');
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    await begun;
    proxy.strand();
    linkDead();
    const failure = await tx;
    expect((failure as { driverError?: unknown })?.driverError).toBeInstanceOf(QueryDeadlineError);
    // The session behind the dead link is idle in its transaction, holding the lock; the server ends it after the
    // idle-in-transaction timeout (the query timeout), and the lock is free. That it ends is what is asserted; the
    // deadline, a minute (sixty times that timeout), means it never would.
    await waitFor(
      "the abandoned transaction's lock to be free",
      () =>
        db!.transaction(async (m) => {
          const rows: { locked: boolean }[] = await m.query('SELECT pg_try_advisory_xact_lock(424242) AS locked');
          return rows[0].locked;
        }),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  }, 120000);

  it("bounds the reply listener's connection the same way", async () => {
    const client = createPostgresClient(
      { ...pg, port: proxy.port, queryTimeoutMs: 1000 },
      'postgres-connection-spec-listen',
    );
    const errors: Error[] = [];
    client.on('error', (e) => errors.push(e));
    await client.connect();
    try {
      proxy.strand();
      await expect(client.query('SELECT 1')).rejects.toBeInstanceOf(QueryDeadlineError);
      // The client reports its connection lost (the reply listener reconnects on this event).
      await waitFor("the client's error event", () => errors.length > 0, { timeoutMs: 60000 });
    } finally {
      await client.end().catch(() => undefined);
    }
  }, 120000);
});

/**
 * Pool checkout leak detection (EVENTMESH_POSTGRES_LEAK_DETECTION_THRESHOLD_MS, libs/storage/pool-leak-detection.ts):
 * a connection held out of the pool past the threshold is reported once, with the stack of the code that took it
 * and the statement it has in flight, and counted; a short checkout is not.
 */
describe('Postgres pool: checkout leak detection (real Postgres)', () => {
  const pg = testConfig().postgres;
  let db: DataSource | undefined;
  afterEach(async () => {
    await db?.destroy().catch(() => undefined);
    db = undefined;
  });

  type Report = [Record<string, unknown>, string];
  async function watched(thresholdMs: number) {
    db = createDataSource(
      { ...pg, poolSize: 2, leakDetectionThresholdMs: thresholdMs },
      'postgres-connection-spec-leaks',
    );
    await db.initialize();
    const detector = poolLeakDetectorOf(db)!;
    const warn = jest.spyOn(detector.log, 'warn');
    const info = jest.spyOn(detector.log, 'info');
    return {
      detector,
      reports: () => warn.mock.calls as unknown as Report[],
      returns: () => info.mock.calls as unknown as Report[],
    };
  }

  /**
   * Holds a connection in a transaction while awaiting `until`, which is not a statement: a leak's shape. (Async and
   * awaiting: a stack taken after an await names only the async functions that await, not plain ones in between.)
   */
  async function holdConnectionInTransaction(until: Promise<void>): Promise<void> {
    await db!.transaction(async (m) => {
      await m.query('SELECT 1');
      await until;
    });
  }

  it("reports a connection held past the threshold while its holder awaits something else: once, with the holder's stack, no statement in flight; counted", async () => {
    const { detector, reports, returns } = await watched(300);
    // Short checkouts, well under the threshold: nothing reported.
    for (let i = 0; i < 5; i++) await db!.query('SELECT 1');
    let letGo!: () => void;
    const held = holdConnectionInTransaction(new Promise<void>((r) => (letGo = r)));
    const heldAt = Date.now();
    const [fields, message] = await waitFor('a leak report', () => reports()[0], { timeoutMs: 60000, intervalMs: 20 });
    expect(Date.now() - heldAt).toBeGreaterThanOrEqual(300);
    expect(message).toMatch(/checked out of the pool for longer than the leak detection threshold/);
    expect(fields).toMatchObject({
      pool: 'postgres-connection-spec-leaks',
      thresholdMs: 300,
      statementInFlight: null,
      poolTotal: 1,
    });
    expect(fields.heldMs as number).toBeGreaterThanOrEqual(300);
    expect(
      (fields.acquiredBy as string[]).some(
        (frame) => frame.includes('holdConnectionInTransaction') && frame.includes('postgres-connection.spec.ts'),
      ),
    ).toBe(true);
    expect(detector.stats()).toEqual({ checkedOut: 1, leaks: 1 });
    // Reported once, however long it is held: a further threshold later, still one report.
    await waitFor('a second threshold of holding', () => Date.now() - heldAt >= 700, {
      timeoutMs: 60000,
      intervalMs: 20,
    });
    expect(reports()).toHaveLength(1);
    letGo();
    await held;
    expect(detector.stats()).toEqual({ checkedOut: 0, leaks: 1 });
    expect(returns()).toHaveLength(1);
    expect(returns()[0][1]).toMatch(/went back to the pool/);
    expect(returns()[0][0].heldMs as number).toBeGreaterThanOrEqual(700);
  }, 180000);

  it('names the statement in flight when the connection is held by a slow statement', async () => {
    const { detector, reports } = await watched(300);
    const slow = db!.query('SELECT pg_sleep(1)');
    const [fields] = await waitFor('a leak report', () => reports()[0], { timeoutMs: 60000, intervalMs: 20 });
    expect(fields.statementInFlight).toBe('SELECT pg_sleep(1)');
    await slow;
    expect(detector.stats()).toEqual({ checkedOut: 0, leaks: 1 });
  }, 120000);

  it('is off unless configured: no detector, the pool as pg makes it', async () => {
    db = createDataSource({ ...pg, poolSize: 1, leakDetectionThresholdMs: 0 }, 'postgres-connection-spec-no-leaks');
    await db.initialize();
    expect(poolLeakDetectorOf(db)).toBeUndefined();
    expect(await db.query('SELECT 1 AS n')).toEqual([{ n: 1 }]);
  }, 60000);
});

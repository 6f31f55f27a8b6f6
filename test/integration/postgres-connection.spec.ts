import type { DataSource } from 'typeorm';
import { createDataSource, createPostgresClient, isPostgresUnavailable, POSTGRES_DEADLINE_GRACE_MS, POSTGRES_PROBE_TIMEOUT_MS, QueryDeadlineError } from '../../libs/storage';
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
    proxy.strand();
    const sentAt = Date.now();
    const failure = await db.query('SELECT 1').then(() => undefined, (e: unknown) => e);
    const tookMs = Date.now() - sentAt;
    expect((failure as { driverError?: unknown })?.driverError).toBeInstanceOf(QueryDeadlineError);
    expect(isPostgresUnavailable(failure)).toBe(true);
    expect(tookMs).toBeGreaterThanOrEqual(1000 + POSTGRES_DEADLINE_GRACE_MS - 50);
    expect(tookMs).toBeLessThan(1000 + POSTGRES_DEADLINE_GRACE_MS + 1500);
    // The pool's only connection was the dead one: the next query needs (and gets) a new one, at once.
    const nextAt = Date.now();
    expect(await db.query('SELECT 7 AS n')).toEqual([{ n: 7 }]);
    expect(Date.now() - nextAt).toBeLessThan(1000);
    expect(proxy.strandedOpen).toBe(0);
  }, 20000);

  it('once one connection misses its deadline, drops the pool\'s other dead connections within a probe, so the next queries do not each wait out a deadline', async () => {
    db = createDataSource({ ...pg, port: proxy.port, poolSize: 3, queryTimeoutMs: 1000 }, 'postgres-connection-spec-probe');
    await db.initialize();
    // Three connections open and idle in the pool.
    await Promise.all([1, 2, 3].map(() => db!.query('SELECT pg_sleep(0.1)')));
    expect(proxy.state.open).toBe(3);
    proxy.strand();
    const failure = await db.query('SELECT 1').then(() => undefined, (e: unknown) => e);
    expect((failure as { driverError?: unknown })?.driverError).toBeInstanceOf(QueryDeadlineError);
    const failedAt = Date.now();
    // The idle ones are probed at once and dropped after the probe deadline (2 s here), not after the pool's idle
    // timeout (10 s) or one by one as each is lent again.
    await waitFor('the pool\'s other dead connections dropped', () => proxy.strandedOpen === 0, { timeoutMs: POSTGRES_PROBE_TIMEOUT_MS + 1000, intervalMs: 50 });
    const droppedMs = Date.now() - failedAt;
    for (const n of [1, 2, 3]) {
      const sentAt = Date.now();
      expect(await db.query(`SELECT ${n} AS n`)).toEqual([{ n }]);
      expect(Date.now() - sentAt).toBeLessThan(1000);
    }
    process.stdout.write(`postgres-connection.spec: the pool's 2 other dead connections dropped ${droppedMs} ms after the first deadline\n`);
  }, 20000);

  it('fails a transaction whose statement went into the dead link, and the server ends the abandoned session\'s transaction', async () => {
    db = createDataSource({ ...pg, port: proxy.port, poolSize: 2, queryTimeoutMs: 1000 }, 'postgres-connection-spec-tx');
    await db.initialize();
    let inTransaction!: () => void;
    let linkDead!: () => void;
    const begun = new Promise<void>((r) => (inTransaction = r));
    const dead = new Promise<void>((r) => (linkDead = r));
    const tx = db.transaction(async (m) => {
      await m.query('SELECT pg_advisory_xact_lock(424242)');
      inTransaction();
      await dead;
      await m.query('SELECT 1');
    }).then(() => undefined, (e: unknown) => e);
    await begun;
    proxy.strand();
    linkDead();
    const failure = await tx;
    expect((failure as { driverError?: unknown })?.driverError).toBeInstanceOf(QueryDeadlineError);
    // The session behind the dead link is idle in its transaction, holding the lock; the server ends it after the
    // idle-in-transaction timeout (the query timeout), and the lock is free.
    await waitFor('the abandoned transaction\'s lock to be free', () =>
      db!.transaction(async (m) => {
        const rows: { locked: boolean }[] = await m.query('SELECT pg_try_advisory_xact_lock(424242) AS locked');
        return rows[0].locked;
      }), { timeoutMs: 3000, intervalMs: 200 });
  }, 20000);

  it('bounds the reply listener\'s connection the same way', async () => {
    const client = createPostgresClient({ ...pg, port: proxy.port, queryTimeoutMs: 1000 }, 'postgres-connection-spec-listen');
    const errors: Error[] = [];
    client.on('error', (e) => errors.push(e));
    await client.connect();
    try {
      proxy.strand();
      await expect(client.query('SELECT 1')).rejects.toBeInstanceOf(QueryDeadlineError);
      // The client reports its connection lost (the reply listener reconnects on this event).
      await waitFor('the client\'s error event', () => errors.length > 0, { timeoutMs: 2000 });
    } finally {
      await client.end().catch(() => undefined);
    }
  }, 20000);
});

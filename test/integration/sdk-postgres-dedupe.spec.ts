import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { PostgresDedupeStore } from '@eventmesh/client';
import { testConfig } from '../support/env';
import { waitFor } from '../support/wait-for';

/** The SDK's Postgres dedupe store on the real Postgres: keyed by (source, id), bounded by count and by age. */
describe('PostgresDedupeStore', () => {
  const pg = testConfig().postgres;
  const pool = new Pool({
    host: pg.host,
    port: pg.port,
    user: pg.user,
    password: pg.password,
    database: pg.database,
    max: 2,
  });
  // Each test's table is dropped afterwards: the test database holds the runtime's tables only (schema.spec.ts).
  const made: string[] = [];
  const table = () => {
    made.push(`sdk_dedupe_${randomUUID().slice(0, 8)}`);
    return made[made.length - 1];
  };
  afterAll(async () => {
    for (const name of made) await pool.query(`DROP TABLE IF EXISTS ${name}`);
    await pool.end();
  });

  it('remembers (source, id) pairs, each pair apart', async () => {
    const store = new PostgresDedupeStore({ pool, table: table() });
    await store.record('/a', 'x');
    expect([await store.seen('/a', 'x'), await store.seen('/b', 'x'), await store.seen('/a', 'y')]).toEqual([
      true,
      false,
      false,
    ]);
  });

  it('keeps the newest maxEntries when it prunes', async () => {
    const store = new PostgresDedupeStore({ pool, table: table(), maxEntries: 3, pruneEvery: 5 });
    for (const id of ['1', '2', '3', '4', '5']) await store.record('/s', id);
    const seen = await Promise.all(['1', '2', '3', '4', '5'].map((id) => store.seen('/s', id)));
    expect(seen).toEqual([false, false, true, true, true]);
  });

  it('forgets a pair older than maxAgeMs', async () => {
    const store = new PostgresDedupeStore({ pool, table: table(), maxAgeMs: 200 });
    await store.record('/s', 'old');
    expect(await store.seen('/s', 'old')).toBe(true);
    await waitFor('the pair aged out', async () => !(await store.seen('/s', 'old')), { timeoutMs: 10000 });
  });

  it('refuses a table name that is not a plain SQL name', () => {
    expect(() => new PostgresDedupeStore({ pool, table: 'x; DROP TABLE y' })).toThrow(
      'is not a plain lower-case SQL name',
    );
  });
});

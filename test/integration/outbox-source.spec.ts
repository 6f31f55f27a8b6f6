import { Pool } from 'pg';
import { validateOutboxConfig } from '../../apps/connectors/src/connectors/postgres-outbox/outbox-config';
import { OutboxSource } from '../../apps/connectors/src/connectors/postgres-outbox/outbox-source';
import { testConfig } from '../support/env';

/**
 * The outbox source's reads on a real Postgres: a backlog written by one transaction (the worst case: every row
 * shares one txid) is read whole, in id order, each row once; and every poll is a range scan of the (txid, id)
 * index that stops after its batch, never a sort of the whole backlog (a poll that sorted cost the server about
 * 13 ms per 20,000 rows left, on every poll).
 */
describe('OutboxSource: polls of a real outbox table', () => {
  const pg = testConfig().postgres;
  const table = `outbox_source_spec_${process.pid}`;
  let pool: Pool;
  let source: OutboxSource;
  /** Each poll's statement, as the source sent it. */
  const sent: { text: string; values: unknown[] }[] = [];

  beforeAll(async () => {
    pool = new Pool({
      host: pg.host,
      port: pg.port,
      database: pg.database,
      user: pg.user,
      password: pg.password,
      max: 2,
    });
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.query(`CREATE TABLE ${table} (
      id bigserial PRIMARY KEY, txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
      aggregatetype text, aggregateid text, type text, payload jsonb)`);
    await pool.query(`CREATE INDEX ON ${table} (txid, id)`);
    // One transaction: every row has the same txid, and ids 1..20000 (text order would put 10 before 9).
    await pool.query(
      `INSERT INTO ${table} (aggregatetype, aggregateid, type, payload)
       SELECT 'order', (o % 64)::text, 'order.created', jsonb_build_object('orderId', o) FROM generate_series(1, 20000) o`,
    );
    await pool.query(`ANALYZE ${table}`);
    const config = validateOutboxConfig({
      connection: { host: pg.host, port: pg.port, database: pg.database, user: pg.user, password: pg.password },
      table,
      topicTemplate: 'orders',
    });
    const recording = Object.create(pool) as Pool;
    recording.query = ((text: string, values: unknown[]) => {
      if (/^\s*SELECT/.test(text)) sent.push({ text, values });
      return pool.query(text, values);
    }) as never;
    source = new OutboxSource(config, recording);
  });
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  });

  it('reads a one-transaction backlog whole, in id order, each row once, and no poll sorts the backlog', async () => {
    const ids: number[] = [];
    let position: string | undefined;
    for (let polls = 0; polls < 100; polls++) {
      const poll = await source.poll(position, 500);
      if (poll.position === undefined) break;
      for (const r of poll.records) if (r.ok) ids.push(Number(r.event.id));
      position = poll.position;
    }
    expect(ids).toEqual(Array.from({ length: 20000 }, (_, i) => i + 1));
    expect(await source.lag(position)).toBe(0);

    // A poll from the middle of the backlog, as the server plans it: the index range, no Sort node.
    const middle = sent.find((s) => s.values.length === 3 && s.values[2] === '10000')!;
    expect(middle).toBeDefined();
    const plan = JSON.stringify(
      (await pool.query(`EXPLAIN (FORMAT JSON) ${middle.text}`, middle.values)).rows[0]['QUERY PLAN'],
    );
    expect(plan).toContain('"Index Scan"');
    expect(plan).not.toContain('"Sort"');
  });

  it('publishes each payload as the JSON it holds, parsed once, an aggregate id of any type as its text, and the table as its source', async () => {
    const other = `${table}_kinds`;
    await pool.query(`DROP TABLE IF EXISTS ${other}`);
    await pool.query(`CREATE TABLE ${other} (
      id bigint PRIMARY KEY, txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
      aggregatetype text, aggregateid jsonb, type text, payload jsonb)`);
    await pool.query(
      `INSERT INTO ${other} (id, aggregatetype, aggregateid, type, payload) VALUES
        (1, 'order', '{"region":"eu","n":7}', 'order.created', '"hello"'),
        (2, 'order', '"a-2"', 'order.created', '"{\\"a\\":1}"'),
        (3, 'order', '42', 'order.created', '"42"'),
        (4, 'order', '42', 'order.created', '{"n":1}'),
        (5, 'order', '42', 'order.created', NULL)`,
    );
    const kinds = new OutboxSource(
      validateOutboxConfig({
        connection: { host: pg.host, port: pg.port, database: pg.database, user: pg.user, password: pg.password },
        table: other,
        topicTemplate: 'orders',
      }),
      pool,
    );
    const { records } = await kinds.poll(undefined, 10);
    expect(
      records.map((r) => (r.ok ? { data: r.event.data, subject: r.event.subject, key: r.event.partitionkey } : r)),
    ).toEqual([
      { data: 'hello', subject: '{"n": 7, "region": "eu"}', key: '{"n": 7, "region": "eu"}' },
      { data: '{"a":1}', subject: '"a-2"', key: '"a-2"' },
      { data: '42', subject: '42', key: '42' },
      { data: { n: 1 }, subject: '42', key: '42' },
      { data: null, subject: '42', key: '42' },
    ]);
    // The table's own source by default: another outbox table's row 1 is another event.
    expect(new Set(records.map((r) => r.ok && r.event.source))).toEqual(
      new Set([`/outbox/${pg.database}/public.${other}`]),
    );
    await pool.query(`DROP TABLE ${other}`);
  });

  it('refuses a table whose id column allows NULL, and a position that is not <txid>:<id>', async () => {
    const nullable = `${table}_nullable`;
    await pool.query(`DROP TABLE IF EXISTS ${nullable}`);
    await pool.query(`CREATE TABLE ${nullable} (
      id bigint, txid xid8 NOT NULL DEFAULT pg_current_xact_id(), aggregatetype text, aggregateid text, type text, payload jsonb)`);
    const connection = { host: pg.host, port: pg.port, database: pg.database, user: pg.user, password: pg.password };
    await expect(OutboxSource.open(validateOutboxConfig({ connection, table: nullable }), pg.host)).rejects.toThrow(
      /^columns\.id: id of .* allows NULL/,
    );
    await pool.query(`DROP TABLE ${nullable}`);
    for (const bad of ['90368', ':5', 'x:5']) await expect(source.poll(bad, 10)).rejects.toThrow(/is not <txid>:<id>/);
  });
});

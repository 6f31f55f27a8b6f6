import { randomBytes } from 'node:crypto';
import { CloudEvent } from 'cloudevents';
import { Pool, PoolClient } from 'pg';
import { validateTableConfig } from '../../apps/connectors/src/connectors/postgres-table/table-config';
import { ledgerKeyOf } from '../../apps/connectors/src/connectors/postgres-table/ledger';
import { TableSink } from '../../apps/connectors/src/connectors/postgres-table/table-sink';
import { testConfig } from '../support/env';

/**
 * The table sink's writes on a real Postgres. Rows go in as one `unnest` statement with an array per column, cast
 * to the column's type (one text, prepared once per connection); a table with an array column, or one the sink
 * cannot see yet, takes a VALUES list. Both write the same rows for the same events, however awkward the values,
 * and neither writes an event twice.
 */
describe('TableSink: writes to a real table', () => {
  const pg = testConfig().postgres;
  const connection = { host: pg.host, port: pg.port, database: pg.database, user: pg.user, password: pg.password };
  // A schema of its own: the ledger table goes beside the target tables, not among the runtime's.
  const schema = `table_sink_spec_${process.pid}`;
  const prefix = `${schema}.orders`;
  let pool: Pool;
  /** Every statement a sink sent, by table. */
  const sent = new Map<string, string[]>();

  const columns = {
    event_id: 'id',
    origin: 'source',
    kind: 'type',
    happened: 'time',
    n: 'data.n',
    amount: 'data.amount',
    doc: 'data.doc',
    flag: 'data.flag',
    note: 'data.note',
  } as const;
  const shape = `event_id text, origin text, kind text, happened timestamptz, n integer, amount numeric(10,2),
    doc jsonb, flag boolean, note varchar(40)`;

  const quotedName = (table: string) =>
    table
      .split('.')
      .map((part) => `"${part}"`)
      .join('.');

  /** A sink on `table`, its statements recorded. */
  const sinkOn = (
    table: string,
    extra: Record<string, string> = {},
    mode: 'append' | 'upsert' = 'append',
    key = ['event_id'],
  ) => {
    const config = validateTableConfig({
      subscriptionId: 's',
      connection,
      table,
      mode,
      key: mode === 'upsert' ? key : undefined,
      columns: { ...columns, ...extra },
    });
    const recording = Object.create(pool) as Pool;
    recording.connect = (async () => {
      const client: PoolClient = await pool.connect();
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      const wrapped = Object.create(client) as PoolClient;
      wrapped.query = ((q: unknown, ...rest: unknown[]) => {
        const text = typeof q === 'string' ? q : (q as { text: string }).text;
        if (text.includes(`INSERT INTO ${quotedName(table)} `)) sent.set(table, [...(sent.get(table) ?? []), text]);
        return query(q, ...rest);
      }) as never;
      wrapped.release = () => client.release();
      return wrapped;
    }) as never;
    // The pool is the spec's: a sink's close leaves it open.
    recording.end = (async () => undefined) as never;
    return new TableSink(config, recording);
  };

  const event = (i: number, data: Record<string, unknown>) =>
    new CloudEvent({
      id: `e-${i}`,
      source: `/orders/${i % 3}`,
      type: 'order.created',
      time: `2026-12-0${1 + (i % 5)}T10:00:00.${String(i % 1000).padStart(3, '0')}Z`,
      datacontenttype: 'application/json',
      data,
    });
  /** Values a text array literal has to escape, and ones that are absent or null. */
  const awkward = ['', 'NULL', 'a,b', '{x}', 'quote " and \\ backslash', 'é ☃ 😀', ' spaced ', null, undefined];
  const events = Array.from({ length: 40 }, (_, i) =>
    event(i, {
      n: i % 7 === 0 ? null : i * 1000,
      amount: i % 5 === 0 ? undefined : (i * 12.345).toFixed(2),
      doc: i % 4 === 0 ? null : { i, nested: { list: [1, 'two', null], text: awkward[i % awkward.length] ?? 'x' } },
      flag: i % 3 === 0 ? null : i % 2 === 0,
      note: awkward[i % awkward.length],
    }),
  );

  const rowsOf = async (table: string) =>
    (
      await pool.query(
        `SELECT event_id, origin, kind, happened, n, amount, doc, flag, note FROM ${table} ORDER BY event_id`,
      )
    ).rows;

  beforeAll(async () => {
    pool = new Pool({ ...connection, max: 4 });
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.query(`CREATE SCHEMA ${schema}`);
    // The ledger beside the tables, as a job's first open makes it.
    const first = await TableSink.open(
      validateTableConfig({
        subscriptionId: 's',
        connection,
        table: `${prefix}_bulk`,
        columns: { event_id: 'id' },
      }),
      pg.host,
    );
    await first.close();
    await pool.query(`CREATE TABLE ${prefix}_bulk (${shape})`);
    await pool.query(`CREATE TABLE ${prefix}_listed (${shape}, tags text[])`);
    await pool.query(`CREATE TABLE ${prefix}_upsert (${shape}, PRIMARY KEY (event_id))`);
  });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.end();
  });

  it('writes a batch as one unnest statement, the same rows a VALUES list writes, and an event delivered again not at all', async () => {
    const bulk = sinkOn(`${prefix}_bulk`);
    // An array column: unnest would flatten it, so this sink writes VALUES lists.
    const listed = sinkOn(`${prefix}_listed`, { tags: 'data.tags' });
    for (const sink of [bulk, listed]) {
      expect(await sink.put(events.slice(0, 25))).toEqual(events.slice(0, 25).map(() => ({ ok: true, written: true })));
      // 20-24 again, with 25-39: only the new ones are written.
      expect((await sink.put(events.slice(20))).map((o) => o.ok && o.written)).toEqual(
        events.slice(20).map((_, i) => i >= 5),
      );
    }
    expect(sent.get(`${prefix}_bulk`)).toEqual([
      expect.stringContaining(
        'unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamp with time zone[], $9::integer[], $10::numeric[], $11::jsonb[], $12::boolean[], $13::character varying[])',
      ),
      expect.stringContaining('unnest('),
    ]);
    expect(sent.get(`${prefix}_listed`)).toEqual([
      expect.stringContaining(' VALUES ('),
      expect.stringContaining(' VALUES ('),
    ]);
    const rows = await rowsOf(`${prefix}_bulk`);
    expect(rows).toHaveLength(events.length);
    expect(rows).toEqual(await rowsOf(`${prefix}_listed`));
    // The awkward values arrived as themselves (and absent or null ones as NULL).
    const notes = new Map(rows.map((r: { event_id: string; note: string | null }) => [r.event_id, r.note]));
    events.forEach((e, i) => expect(notes.get(e.id)).toBe(awkward[i % awkward.length] ?? null));
    await Promise.all([bulk.close(), listed.close()]);
  });

  it('refuses a value too long for its column on every path, as an insert does, and writes the rest: never cut to fit', async () => {
    const tooLong = event(950, { note: 'x'.repeat(41) });
    const fits = event(951, { note: 'y'.repeat(40) });
    await pool.query(`CREATE TABLE ${prefix}_long_bulk (${shape})`);
    await pool.query(`CREATE TABLE ${prefix}_long_listed (${shape}, tags text[])`);
    await pool.query(`CREATE TABLE ${prefix}_long_identified (${shape}, UNIQUE (origin, event_id))`);
    const sinks: [string, TableSink][] = [
      [`${prefix}_long_bulk`, sinkOn(`${prefix}_long_bulk`)],
      [`${prefix}_long_listed`, sinkOn(`${prefix}_long_listed`, { tags: 'data.tags' })],
      [
        `${prefix}_long_identified`,
        await TableSink.open(
          validateTableConfig({
            subscriptionId: 's',
            connection,
            table: `${prefix}_long_identified`,
            columns,
            dedupe: 'table',
          }),
          pg.host,
        ),
      ],
    ];
    for (const [table, sink] of sinks) {
      expect(await sink.put([tooLong, fits])).toEqual([
        { ok: false, permanent: true, reason: expect.stringMatching(/too long for type character varying\(40\)/) },
        { ok: true, written: true },
      ]);
      expect((await rowsOf(table)).map((r: { event_id: string; note: string }) => [r.event_id, r.note])).toEqual([
        [fits.id, fits.data!.note],
      ]);
      await sink.close();
    }
  });

  it('writes an array column as arrays through the VALUES list, with the ledger and with dedupe table, and a batch past the parameter limit in parts', async () => {
    const tagsOf = ['a', 'b,c', 'quote " and \\ backslash', '{x}', 'NULL', 'é ☃'];
    const tagged = [
      event(960, { tags: tagsOf }),
      event(961, { tags: [] }),
      event(962, { tags: null }),
      event(963, { n: 1 }),
    ];
    await pool.query(`CREATE TABLE ${prefix}_tags_ledger (${shape}, tags text[])`);
    await pool.query(`CREATE TABLE ${prefix}_tags_identified (${shape}, tags text[], UNIQUE (origin, event_id))`);
    const identifiedSink = await TableSink.open(
      validateTableConfig({
        subscriptionId: 's',
        connection,
        table: `${prefix}_tags_identified`,
        columns: { ...columns, tags: 'data.tags' },
        dedupe: 'table',
      }),
      pg.host,
    );
    const sinks: [string, TableSink][] = [
      [`${prefix}_tags_ledger`, sinkOn(`${prefix}_tags_ledger`, { tags: 'data.tags' })],
      [`${prefix}_tags_identified`, identifiedSink],
    ];
    try {
      for (const [table, sink] of sinks) {
        expect(await sink.put(tagged)).toEqual(tagged.map(() => ({ ok: true, written: true })));
        expect(await sink.put(tagged)).toEqual(tagged.map(() => ({ ok: true, written: false })));
        const { rows } = await pool.query<{ event_id: string; tags: string[] | null }>(
          `SELECT event_id, tags FROM ${table} ORDER BY event_id`,
        );
        expect(rows).toEqual([
          { event_id: 'e-960', tags: tagsOf },
          { event_id: 'e-961', tags: [] },
          { event_id: 'e-962', tags: null },
          { event_id: 'e-963', tags: null },
        ]);
      }
      // 10 columns: a VALUES list of 7,000 rows would be 70,000 parameters, past the 65,535 a statement takes.
      const many = Array.from({ length: 7000 }, (_, i) => event(10000 + i, { tags: [String(i)] }));
      const outcomes = await identifiedSink.put(many);
      expect(outcomes.filter((o) => o.ok && o.written)).toHaveLength(many.length);
      expect((await pool.query(`SELECT count(*)::int AS n FROM ${prefix}_tags_identified`)).rows[0].n).toBe(
        tagged.length + many.length,
      );
    } finally {
      for (const [, sink] of sinks) await sink.close();
    }
  });

  it('writes each value as a plain insert of it would, on both paths: char(n) and bit(n) whole, any value into a JSON column as JSON, binary data as bytes, nothing from an inherited member', async () => {
    const kinds = `event_id text, code char(5), bits bit(3), doc jsonb, inherited text`;
    await pool.query(`CREATE TABLE ${prefix}_kinds_bulk (${kinds})`);
    await pool.query(`CREATE TABLE ${prefix}_kinds_listed (${kinds}, tags text[])`);
    const kindColumns = {
      event_id: 'id',
      code: 'data.code',
      bits: 'data.bits',
      doc: 'data.doc',
      inherited: 'data.constructor',
    } as const;
    const valued = [
      event(970, { code: 'abcde', bits: '101', doc: 'hello' }),
      event(971, { code: 'ab', bits: '011', doc: { a: [1, 'two'] } }),
      event(972, { doc: 123 }),
      event(973, { doc: true }),
    ];
    for (const [table, extra] of [
      [`${prefix}_kinds_bulk`, {}],
      [`${prefix}_kinds_listed`, { tags: 'data.tags' }],
    ] as const) {
      const config = validateTableConfig({
        subscriptionId: 's',
        connection,
        table,
        columns: { ...kindColumns, ...extra },
      });
      const sink = new TableSink(config, pool);
      expect(await sink.put(valued)).toEqual(valued.map(() => ({ ok: true, written: true })));
      const { rows } = await pool.query(
        `SELECT event_id, code, bits, doc, jsonb_typeof(doc) AS doc_type, inherited FROM ${table} ORDER BY event_id`,
      );
      expect(rows).toEqual([
        { event_id: 'e-970', code: 'abcde', bits: '101', doc: 'hello', doc_type: 'string', inherited: null },
        { event_id: 'e-971', code: 'ab   ', bits: '011', doc: { a: [1, 'two'] }, doc_type: 'object', inherited: null },
        { event_id: 'e-972', code: null, bits: null, doc: 123, doc_type: 'number', inherited: null },
        { event_id: 'e-973', code: null, bits: null, doc: true, doc_type: 'boolean', inherited: null },
      ]);
    }
    // Binary data (`data_base64` on the wire: a Uint8Array in the event) into bytea.
    await pool.query(`CREATE TABLE ${prefix}_bytes (event_id text, raw bytea)`);
    const bytes = new Uint8Array([0, 104, 105, 255]);
    const binary = new CloudEvent({ id: 'b-1', source: '/bytes', type: 't', data: bytes });
    const byteSink = new TableSink(
      validateTableConfig({
        subscriptionId: 's',
        connection,
        table: `${prefix}_bytes`,
        columns: { event_id: 'id', raw: 'data' },
      }),
      pool,
    );
    expect(await byteSink.put([binary])).toEqual([{ ok: true, written: true }]);
    expect((await pool.query(`SELECT raw FROM ${prefix}_bytes`)).rows).toEqual([{ raw: Buffer.from(bytes) }]);
    // char(n) as the identity of dedupe table: each id whole, each event its own row.
    await pool.query(`CREATE TABLE ${prefix}_fixed_ids (origin text, eid char(8), UNIQUE (origin, eid))`);
    const fixed = await TableSink.open(
      validateTableConfig({
        subscriptionId: 's',
        connection,
        table: `${prefix}_fixed_ids`,
        columns: { origin: 'source', eid: 'id' },
        dedupe: 'table',
      }),
      pg.host,
    );
    try {
      const ids = [1, 2, 3].map((i) => new CloudEvent({ id: `e-${i}`, source: '/fixed', type: 't', data: {} }));
      expect(await fixed.put(ids)).toEqual(ids.map(() => ({ ok: true, written: true })));
      expect(await fixed.put(ids)).toEqual(ids.map(() => ({ ok: true, written: false })));
      expect((await pool.query(`SELECT eid FROM ${prefix}_fixed_ids ORDER BY eid`)).rows).toEqual(
        ['e-1     ', 'e-2     ', 'e-3     '].map((eid) => ({ eid })),
      );
    } finally {
      await fixed.close();
    }
  });

  it("dead-letters the event a trigger refuses or too large for the table's index, and writes the rest of its batch", async () => {
    const table = `${prefix}_guarded`;
    await pool.query(`CREATE TABLE ${table} (${shape}, UNIQUE (origin, event_id))`);
    await pool.query(`CREATE FUNCTION ${schema}.refuse_bad() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.note = 'bad' THEN RAISE EXCEPTION 'note bad refused'; END IF; RETURN NEW; END $$`);
    await pool.query(
      `CREATE TRIGGER refuse_bad BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${schema}.refuse_bad()`,
    );
    const bad = event(980, { note: 'bad' });
    const good = event(981, { note: 'good' });
    // An id past what a btree index row holds (about 2,700 bytes; random, so it does not compress).
    const huge = new CloudEvent({ id: randomBytes(6000).toString('hex'), source: '/huge', type: 't', data: {} });
    const sinks = [
      sinkOn(table),
      await TableSink.open(
        validateTableConfig({ subscriptionId: 's', connection, table, columns, dedupe: 'table' }),
        pg.host,
      ),
    ];
    for (const sink of sinks) {
      const outcomes = await sink.put([bad, good, huge]);
      expect(outcomes.map((o) => (o.ok ? 'written' : o.permanent ? 'permanent' : 'transient'))).toEqual([
        'permanent',
        expect.stringMatching(/^written$/),
        'permanent',
      ]);
      await sink.close();
    }
    expect((await pool.query(`SELECT event_id FROM ${table}`)).rows).toEqual([{ event_id: good.id }]);
  });

  it('upserts with every mapped column in the key: an event with a key the table holds writes nothing, not a refusal', async () => {
    const table = `${prefix}_all_key`;
    await pool.query(`CREATE TABLE ${table} (event_id text PRIMARY KEY)`);
    const sink = new TableSink(
      validateTableConfig({
        subscriptionId: 's',
        connection,
        table,
        mode: 'upsert',
        key: ['event_id'],
        columns: { event_id: 'id' },
      }),
      pool,
    );
    expect(await sink.put(events.slice(0, 3))).toEqual(events.slice(0, 3).map(() => ({ ok: true, written: true })));
    expect((await sink.put(events.slice(0, 3))).every((o) => o.ok)).toBe(true);
    expect((await pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n).toBe(3);
  });

  it('upserts by the key through unnest: a later event with the same key replaces the row', async () => {
    const sink = sinkOn(`${prefix}_upsert`, {}, 'upsert');
    await sink.put([event(1, { n: 1, note: 'first' })]);
    // The key from the data: two events (two ids) with the same key, one row.
    const keyed = sinkOn(`${prefix}_upsert`, { event_id: 'data.key' }, 'upsert');
    await keyed.put([event(100, { key: 'k', n: 1, note: 'one' })]);
    await keyed.put([event(101, { key: 'k', n: 2, note: 'two' })]);
    const { rows } = await pool.query(`SELECT event_id, n, note FROM ${prefix}_upsert ORDER BY event_id`);
    expect(rows).toEqual([
      { event_id: 'e-1', n: 1, note: 'first' },
      { event_id: 'k', n: 2, note: 'two' },
    ]);
    expect(
      sent.get(`${prefix}_upsert`)!.every((text) => text.includes('unnest(') && text.includes('ON CONFLICT')),
    ).toBe(true);
    await Promise.all([sink.close(), keyed.close()]);
  });

  it('writes a column named __proto__ (an own key of the JSON config) like any other, and upserts by it', async () => {
    const table = `${prefix}_proto`;
    await pool.query(`CREATE TABLE ${table} ("__proto__" text PRIMARY KEY, event_id text)`);
    const sink = new TableSink(
      validateTableConfig({
        subscriptionId: 's',
        connection,
        table,
        mode: 'upsert',
        key: ['__proto__'],
        columns: JSON.parse('{"__proto__": "data.key", "event_id": "id"}'),
      }),
      pool,
    );
    await sink.put([event(1, { key: 'k' })]);
    await sink.put([event(2, { key: 'k' }), event(3, { key: 'l' })]);
    const { rows } = await pool.query(`SELECT "__proto__" AS proto, event_id FROM ${table} ORDER BY 1`);
    expect(rows).toEqual([
      { proto: 'k', event_id: 'e-2' },
      { proto: 'l', event_id: 'e-3' },
    ]);
  });

  it('upserts a batch holding one key several times: the last of them is the row, every event applied once', async () => {
    const bulk = sinkOn(`${prefix}_upsert`, { event_id: 'data.key' }, 'upsert');
    const listed = sinkOn(`${prefix}_listed`, { event_id: 'data.key', tags: 'data.tags' }, 'upsert');
    await pool.query(`CREATE UNIQUE INDEX ON ${prefix}_listed (event_id)`);
    for (const [sink, table] of [
      [bulk, `${prefix}_upsert`],
      [listed, `${prefix}_listed`],
    ] as const) {
      const batch = [
        event(200, { key: 'same', n: 1, note: 'first' }),
        event(201, { key: 'other', n: 2, note: 'other' }),
        event(202, { key: 'same', n: 3, note: 'last' }),
      ];
      expect(await sink.put(batch)).toEqual(batch.map(() => ({ ok: true, written: true })));
      // Delivered again: applied already, nothing changes.
      await pool.query(`UPDATE ${table} SET note = 'kept' WHERE event_id = 'same'`);
      expect(await sink.put(batch)).toEqual(batch.map(() => ({ ok: true, written: false })));
      const { rows } = await pool.query(
        `SELECT event_id, n, note FROM ${table} WHERE event_id IN ('same', 'other') ORDER BY event_id`,
      );
      expect(rows).toEqual([
        { event_id: 'other', n: 2, note: 'other' },
        { event_id: 'same', n: 3, note: 'kept' },
      ]);
    }
    expect(sent.get(`${prefix}_listed`)!.at(-1)).toContain(' VALUES (');
    await Promise.all([bulk.close(), listed.close()]);
  });

  it('upserts events whose key is NULL each as a row of its own (a unique index lets such rows be), on both paths', async () => {
    await pool.query(`CREATE TABLE ${prefix}_nullable (${shape}, tags text[])`);
    await pool.query(`CREATE UNIQUE INDEX ON ${prefix}_nullable (event_id)`);
    const bulk = sinkOn(`${prefix}_upsert_nullable`, { event_id: 'data.key' }, 'upsert');
    await pool.query(`CREATE TABLE ${prefix}_upsert_nullable (${shape})`);
    await pool.query(`CREATE UNIQUE INDEX ON ${prefix}_upsert_nullable (event_id)`);
    const listed = sinkOn(`${prefix}_nullable`, { event_id: 'data.key', tags: 'data.tags' }, 'upsert');
    for (const [sink, table] of [
      [bulk, `${prefix}_upsert_nullable`],
      [listed, `${prefix}_nullable`],
    ] as const) {
      const batch = [
        event(300, { n: 1 }),
        event(301, { key: 'k', n: 2 }),
        event(302, { n: 3 }),
        event(303, { key: 'k', n: 4 }),
      ];
      expect(await sink.put(batch)).toEqual(batch.map(() => ({ ok: true, written: true })));
      const { rows } = await pool.query(`SELECT event_id, n FROM ${table} ORDER BY n`);
      expect(rows).toEqual([
        { event_id: null, n: 1 },
        { event_id: null, n: 3 },
        { event_id: 'k', n: 4 },
      ]);
    }
    await Promise.all([bulk.close(), listed.close()]);
  });

  it('a batch Postgres refuses as updating one row twice (keys equal only as the column type) is written event by event', async () => {
    await pool.query(`CREATE TABLE ${prefix}_coerced (${shape}, tags text[])`);
    await pool.query(`CREATE UNIQUE INDEX ON ${prefix}_coerced (n)`);
    // An array column takes the VALUES list, whose batch keys are compared as JSON: "7" and 7 differ there, and are
    // one integer in the table.
    const sink = sinkOn(`${prefix}_coerced`, { n: 'data.n', tags: 'data.tags' }, 'upsert', ['n']);
    const batch = [event(400, { n: '7', note: 'first' }), event(401, { n: 7, note: 'last' })];
    expect(await sink.put(batch)).toEqual(batch.map(() => ({ ok: true, written: true })));
    expect((await pool.query(`SELECT n, note FROM ${prefix}_coerced`)).rows).toEqual([{ n: 7, note: 'last' }]);
    await sink.close();
  });

  it('takes over a ledger of the earlier layout: an event applied under it writes nothing', async () => {
    const old = `table_sink_old_${process.pid}`;
    await pool.query(`DROP SCHEMA IF EXISTS ${old} CASCADE`);
    await pool.query(`CREATE SCHEMA ${old}`);
    await pool.query(`CREATE TABLE ${old}.eventmesh_applied_events (
      sink text NOT NULL, source text NOT NULL, id text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (sink, source, id))`);
    await pool.query(`CREATE TABLE ${old}.orders (${shape})`);
    // Texts JSON escapes: quotes, backslashes, control characters, non-ASCII.
    const applied = ['plain', 'quote " and \\ backslash', 'tab\tnew\nline\u0001\u001f', 'é ☃ 😀 \u2028'].map(
      // Not validated: the ledger keys what it is given (a source with a quote and a backslash is no URI).
      (id, i) => new CloudEvent({ id, source: `/src/${i}"\\`, type: 't', data: { n: i } }, false),
    );
    for (const e of applied)
      await pool.query(`INSERT INTO ${old}.eventmesh_applied_events (sink, source, id) VALUES ($1, $2, $3)`, [
        `${old}.orders`,
        e.source,
        e.id,
      ]);
    const config = validateTableConfig({
      subscriptionId: 's',
      connection,
      table: `${old}.orders`,
      columns: { event_id: 'id' },
    });
    const sink = await TableSink.open(config, pg.host);
    const keys = (await pool.query(`SELECT key FROM ${old}.eventmesh_sink_ledger ORDER BY applied_at, key`)).rows.map(
      (r: { key: string }) => r.key,
    );
    expect(keys.sort()).toEqual(applied.map((e) => ledgerKeyOf(`${old}.orders`, e)).sort());
    const fresh = new CloudEvent({ id: 'new', source: '/src/0', type: 't', data: {} });
    expect(await sink.put([...applied, fresh])).toEqual([
      ...applied.map(() => ({ ok: true, written: false })),
      { ok: true, written: true },
    ]);
    expect((await pool.query(`SELECT event_id FROM ${old}.orders`)).rows).toEqual([{ event_id: 'new' }]);
    // Opened again (another replica): nothing copied twice, nothing lost.
    await (await TableSink.open(config, pg.host)).close();
    expect((await pool.query(`SELECT count(*)::int AS n FROM ${old}.eventmesh_sink_ledger`)).rows).toEqual([{ n: 5 }]);
    await sink.close();
    await pool.query(`DROP SCHEMA ${old} CASCADE`);
  });

  it('forgets only its own ledger rows past ledgerRetentionHours: an event within it writes nothing again, one past it is written again', async () => {
    const config = (table: string, ledgerRetentionHours?: number) =>
      validateTableConfig({
        subscriptionId: 's',
        connection,
        table,
        columns: { event_id: 'id' },
        ledgerRetentionHours,
      });
    await pool.query(`CREATE TABLE ${prefix}_kept (event_id text)`);
    await pool.query(`CREATE TABLE ${prefix}_forever (event_id text)`);
    const kept = await TableSink.open(config(`${prefix}_kept`, 1), pg.host);
    const forever = await TableSink.open(config(`${prefix}_forever`), pg.host);
    const [old, recent] = [event(900, { n: 1 }), event(901, { n: 2 })];
    expect(await kept.put([old, recent])).toEqual([
      { ok: true, written: true },
      { ok: true, written: true },
    ]);
    expect(await forever.put([old])).toEqual([{ ok: true, written: true }]);
    // Two hours ago: `old` for both sinks.
    await pool.query(
      `UPDATE ${schema}.eventmesh_sink_ledger SET applied_at = now() - interval '2 hours' WHERE key = ANY($1::uuid[])`,
      [[ledgerKeyOf(`${prefix}_kept`, old), ledgerKeyOf(`${prefix}_forever`, old)]],
    );
    expect(await kept.prune()).toBe(1);
    expect(await forever.prune()).toBe(0);
    const ledger = async () =>
      (
        await pool.query(
          `SELECT sink, id FROM ${schema}.eventmesh_sink_ledger WHERE id IN ('e-900', 'e-901') ORDER BY sink, id`,
        )
      ).rows;
    expect(await ledger()).toEqual([
      { sink: `${prefix}_forever`, id: 'e-900' },
      { sink: `${prefix}_kept`, id: 'e-901' },
    ]);
    // Within the retention: nothing again. Past it: written again (the guarantee holds within the retention).
    expect(await kept.put([recent, old])).toEqual([
      { ok: true, written: false },
      { ok: true, written: true },
    ]);
    expect(await forever.put([old])).toEqual([{ ok: true, written: false }]);
    expect((await pool.query(`SELECT event_id FROM ${prefix}_kept ORDER BY event_id`)).rows).toEqual([
      { event_id: 'e-900' },
      { event_id: 'e-900' },
      { event_id: 'e-901' },
    ]);
    expect(
      (await pool.query(`SELECT to_regclass($1)::text AS index`, [`${schema}.eventmesh_sink_ledger_sink_applied_at`]))
        .rows,
    ).toEqual([{ index: `${schema}.eventmesh_sink_ledger_sink_applied_at` }]);
    await Promise.all([kept.close(), forever.close()]);
    for (const bad of [-1, 1.5, '24', 87601])
      expect(() => config(`${prefix}_kept`, bad as number)).toThrow(
        expect.objectContaining({ field: 'ledgerRetentionHours' }),
      );
  });

  it('a sink that closes during a prune stops after the statement in flight, not after the whole backlog', async () => {
    const table = `${prefix}_backlog`;
    await pool.query(`CREATE TABLE ${table} (event_id text)`);
    // 25,000 ledger rows of this table, a day old: three prune statements' worth.
    await pool.query(
      `INSERT INTO ${schema}.eventmesh_sink_ledger (key, sink, source, id, applied_at)
       SELECT gen_random_uuid(), $1, '/old', 'old-' || g, now() - interval '1 day' FROM generate_series(1, 25000) g`,
      [table],
    );
    const config = validateTableConfig({
      subscriptionId: 's',
      connection,
      table,
      columns: { event_id: 'id' },
      ledgerRetentionHours: 1,
    });
    const sink = await TableSink.open(config, pg.host);
    const pruning = sink.prune();
    await sink.close();
    expect(await pruning).toBe(10000);
    const left = await pool.query(`SELECT count(*)::int AS n FROM ${schema}.eventmesh_sink_ledger WHERE sink = $1`, [
      table,
    ]);
    expect(left.rows).toEqual([{ n: 15000 }]);
  });

  it('an upsert whose unique key is gone is a transient failure the job retries, not a dead letter', async () => {
    const table = `${prefix}_upsert_unkeyed_later`;
    await pool.query(`CREATE TABLE ${table} (${shape})`);
    await pool.query(`CREATE UNIQUE INDEX upsert_unkeyed_later_key ON ${table} (event_id)`);
    const sink = sinkOn(table, {}, 'upsert');
    expect(await sink.put([event(1, { n: 1 })])).toEqual([{ ok: true, written: true }]);
    await pool.query(`DROP INDEX ${schema}.upsert_unkeyed_later_key`);
    expect(await sink.put([event(2, { n: 2 })])).toEqual([expect.objectContaining({ ok: false, permanent: false })]);
    await sink.close();
  });

  describe('dedupe table', () => {
    const identified = (table: string, extra: Record<string, unknown> = {}) =>
      validateTableConfig({ subscriptionId: 's', connection, table, columns, dedupe: 'table', ...extra });
    const ledgerRows = async () =>
      (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.eventmesh_sink_ledger`)).rows[0].n;

    it("records each event by the table's unique index on (source, id): an event sent again writes nothing, and no ledger row is made", async () => {
      const table = `${prefix}_identified`;
      await pool.query(`CREATE TABLE ${table} (${shape}, UNIQUE (origin, event_id))`);
      const sink = await TableSink.open(identified(table), pg.host);
      const ledgerBefore = await ledgerRows();
      try {
        expect(sink.exactlyOnce).toContain('unique key');
        expect(await sink.put(events.slice(0, 25))).toEqual(
          events.slice(0, 25).map(() => ({ ok: true, written: true })),
        );
        // 20-24 again and 25-39, with 30 twice in the batch: every one applied (none refused), only the new ones
        // written, each once.
        const again = [...events.slice(20), events[30]];
        expect(await sink.put(again)).toEqual(
          again.map((_, i) => ({ ok: true, written: i >= 5 && i < again.length - 1 })),
        );
        // Another source's event with an id the table holds is an event of its own.
        const elsewhere = new CloudEvent({
          id: events[0].id,
          source: '/elsewhere',
          type: 'order.created',
          data: { n: 1 },
        });
        expect(await sink.put([elsewhere])).toEqual([{ ok: true, written: true }]);
        const rows = await rowsOf(table);
        expect(rows).toHaveLength(events.length + 1);
        const notes = new Map(
          rows
            .filter((r: { origin: string }) => r.origin !== '/elsewhere')
            .map((r: { event_id: string; note: string | null }) => [r.event_id, r.note]),
        );
        events.forEach((e, i) => expect(notes.get(e.id)).toBe(awkward[i % awkward.length] ?? null));
        expect(await ledgerRows()).toBe(ledgerBefore);
      } finally {
        await sink.close();
      }
    });

    it('opens only on a table with a unique index on exactly the columns of source and id', async () => {
      const refused: [string, string][] = [
        ['none', ''],
        ['plain', ''],
        ['id_only', ', UNIQUE (event_id)'],
        ['wider', ', UNIQUE (origin, event_id, kind)'],
        ['partial', ''],
      ];
      for (const [name, constraint] of refused)
        await pool.query(`CREATE TABLE ${prefix}_${name} (${shape}${constraint})`);
      await pool.query(`CREATE INDEX ON ${prefix}_plain (origin, event_id)`);
      await pool.query(`CREATE UNIQUE INDEX ON ${prefix}_partial (origin, event_id) WHERE n > 0`);
      for (const [name] of refused)
        await expect(TableSink.open(identified(`${prefix}_${name}`), pg.host)).rejects.toThrow(
          /^config\.dedupe: .* has no unique index on exactly \(origin, event_id\)/,
        );
      // ON CONFLICT cannot use a deferrable one, and takes every unique index on the key as its arbiter: one
      // deferrable beside an immediate one is refused too.
      await pool.query(`CREATE TABLE ${prefix}_deferrable (${shape}, UNIQUE (origin, event_id) DEFERRABLE)`);
      await pool.query(`CREATE TABLE ${prefix}_both (${shape}, UNIQUE (origin, event_id) DEFERRABLE)`);
      await pool.query(`CREATE UNIQUE INDEX ON ${prefix}_both (event_id, origin)`);
      for (const name of ['deferrable', 'both'])
        await expect(TableSink.open(identified(`${prefix}_${name}`), pg.host)).rejects.toThrow(
          /^config\.dedupe: .* has a deferrable unique index on \(origin, event_id\)/,
        );
      // A primary key on the two in the other order is such an index; so is a unique one that includes more.
      await pool.query(`CREATE TABLE ${prefix}_keyed (${shape}, PRIMARY KEY (event_id, origin))`);
      await pool.query(`CREATE TABLE ${prefix}_including (${shape})`);
      await pool.query(`CREATE UNIQUE INDEX ON ${prefix}_including (origin, event_id) INCLUDE (kind)`);
      for (const name of ['keyed', 'including'])
        await (await TableSink.open(identified(`${prefix}_${name}`), pg.host)).close();
    });

    it('counts an event written when its column keeps less of it, as an insert does (spaces past a varchar(n) cut)', async () => {
      const table = `${prefix}_bounded`;
      await pool.query(`CREATE TABLE ${table} (origin varchar(12), event_id varchar(6), UNIQUE (origin, event_id))`);
      const config = identified(table, { columns: { origin: 'source', event_id: 'id' } });
      const sink = await TableSink.open(config, pg.host);
      const of = (eventId: string) => new CloudEvent({ id: eventId, source: '/bounded', type: 't', data: {} });
      try {
        expect(await sink.put([of('abc     '), of('abd')])).toEqual([
          { ok: true, written: true },
          { ok: true, written: true },
        ]);
        // The same id as stored: the row is there, nothing written.
        expect(await sink.put([of('abc   ')])).toEqual([{ ok: true, written: false }]);
        expect((await pool.query(`SELECT event_id FROM ${table} ORDER BY event_id`)).rows).toEqual([
          { event_id: 'abc   ' },
          { event_id: 'abd' },
        ]);
      } finally {
        await sink.close();
      }
    });

    it('two events the column type sees as one (a UUID in two cases) are one row, written by the first', async () => {
      const table = `${prefix}_uuids`;
      await pool.query(`CREATE TABLE ${table} (origin text, event_id uuid, UNIQUE (origin, event_id))`);
      const config = identified(table, { columns: { origin: 'source', event_id: 'id' } });
      const sink = await TableSink.open(config, pg.host);
      const id = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11';
      const of = (eventId: string) => new CloudEvent({ id: eventId, source: '/uuids', type: 't', data: {} });
      try {
        expect(await sink.put([of(id.toUpperCase()), of(id)])).toEqual([
          { ok: true, written: true },
          { ok: true, written: false },
        ]);
        expect((await pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n).toBe(1);
      } finally {
        await sink.close();
      }
    });

    it('a write after its index is gone is a transient failure the job retries, not a dead letter', async () => {
      const table = `${prefix}_unindexed_later`;
      await pool.query(`CREATE TABLE ${table} (${shape})`);
      await pool.query(`CREATE UNIQUE INDEX unindexed_later_identity ON ${table} (origin, event_id)`);
      const sink = await TableSink.open(identified(table), pg.host);
      try {
        expect(await sink.put(events.slice(0, 2))).toEqual(events.slice(0, 2).map(() => ({ ok: true, written: true })));
        await pool.query(`DROP INDEX ${schema}.unindexed_later_identity`);
        expect(await sink.put(events.slice(2, 4))).toEqual(
          events
            .slice(2, 4)
            .map(() => ({ ok: false, permanent: false, reason: expect.stringMatching(/^config\.dedupe: /) })),
        );
      } finally {
        await sink.close();
      }
    });

    it('is refused with the field named for an upsert, a missing source or id column, and a ledger retention', () => {
      const table = `${prefix}_identified`;
      const { origin: _origin, ...withoutSource } = columns;
      for (const [extra, field] of [
        [{ mode: 'upsert', key: ['event_id'] }, 'dedupe'],
        [{ columns: withoutSource }, 'columns'],
        [{ columns: { ...columns, again: 'id' } }, 'columns'],
        [{ ledgerRetentionHours: 1 }, 'ledgerRetentionHours'],
        [{ dedupe: 'rows' }, 'dedupe'],
      ] as const)
        expect(() => identified(table, extra)).toThrow(expect.objectContaining({ field }));
    });
  });

  it('a table or column that is not there yet fails the write as transient, naming it, with the ledger and with dedupe table; once made, the next write finds it', async () => {
    const transient = (reason: RegExp) => ({ ok: false, permanent: false, reason: expect.stringMatching(reason) });
    const table = `${prefix}_late`;
    const sink = sinkOn(table);
    // No event is to blame: none is dead-lettered, the job writes again at its nack pace.
    expect(await sink.put(events.slice(0, 2))).toEqual([0, 1].map(() => transient(/^table .*_late not found/)));
    await pool.query(`CREATE TABLE ${table} (${shape.replace(', note varchar(40)', '')})`);
    expect(await sink.put(events.slice(0, 2))).toEqual(
      [0, 1].map(() => transient(/^table .*_late has no column note$/)),
    );
    await pool.query(`ALTER TABLE ${table} ADD COLUMN note varchar(40)`);
    expect(await sink.put([event(1, { n: 1 })])).toEqual([{ ok: true, written: true }]);
    expect(sent.get(table)).toEqual([expect.stringContaining('unnest(')]);
    expect((await pool.query(`SELECT n FROM ${table}`)).rows).toEqual([{ n: 1 }]);
    // A column dropped after the statement was learned: Postgres's refusal (42703), transient too.
    await pool.query(`ALTER TABLE ${table} DROP COLUMN note`);
    expect(await sink.put([event(2, { n: 2 })])).toEqual([transient(/column "note" .*does not exist/)]);
    await sink.close();

    const identifiedTable = `${prefix}_late_identified`;
    await pool.query(`CREATE TABLE ${identifiedTable} (event_id text, origin text, UNIQUE (origin, event_id))`);
    const identifiedSink = await TableSink.open(
      validateTableConfig({ subscriptionId: 's', connection, table: identifiedTable, columns, dedupe: 'table' }),
      pg.host,
    );
    try {
      expect(await identifiedSink.put(events.slice(0, 2))).toEqual(
        [0, 1].map(() =>
          transient(/^table .*_late_identified has no column kind, happened, n, amount, doc, flag, note$/),
        ),
      );
      await pool.query(`DROP TABLE ${identifiedTable}`);
      await pool.query(`CREATE TABLE ${identifiedTable} (${shape}, UNIQUE (origin, event_id))`);
      expect(await identifiedSink.put(events.slice(0, 2))).toEqual([0, 1].map(() => ({ ok: true, written: true })));
    } finally {
      await identifiedSink.close();
    }
  });
});

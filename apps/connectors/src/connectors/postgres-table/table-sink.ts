import type { CloudEvent } from '@eventmesh/client';
import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import type { PutOutcome, SinkConnector } from '../../spi';
import { createLogger } from '@libs/logging';
import { poolFor, qualified, quoted } from '../config-fields';
import { createLedger, LEDGER, ledgerKeyOf } from './ledger';
import { requireColumns, requireIdentityIndex } from './table-catalog';
import type { ColumnValue, TableConfig } from './table-config';
import { valueKindsOf, valueOf, type ValueKind } from './table-values';

const log = createLogger('TableSink');

/** How often a sink with a ledger retention deletes its rows past it, the first time this long after it opens. */
const PRUNE_EVERY_MS = 10 * 60 * 1000;
const PRUNE_FIRST_MS = 60 * 1000;
/** The parameters one statement takes at most (the protocol's count is 16 bits). */
const MAX_PARAMETERS = 65535;
/** Ledger rows one prune statement deletes at most. */
const PRUNE_CHUNK = 10000;

/**
 * A table as a sink. Each batch is written by one statement, atomic as any statement is: the events' ledger rows
 * go in first (`ON CONFLICT DO NOTHING RETURNING`), and only the events the ledger took are written as rows. A
 * ledger row's key is a 128-bit hash of (sink, source, id) ({@link ledgerKeyOf}); the three are kept beside it for
 * reading. A redelivered event (its ack lost to a crash) finds its ledger row and writes nothing, in append mode
 * too; two replicas writing the same event at once serialize on the ledger row's key, and the second writes
 * nothing. The ack to the runtime follows the commit, so a crash between them means a redelivery, which the ledger
 * absorbs. In upsert mode, of the batch's events with one key the last is the row.
 *
 * With `dedupe: table` there is no ledger: the table's unique index on the columns of the event's source and id
 * (checked when the sink opens) is the record, and the batch's statement inserts with `ON CONFLICT DO NOTHING` on
 * it, so an event whose row is there writes nothing, by the same argument.
 */
export class TableSink implements SinkConnector {
  readonly exactlyOnce: string;
  private readonly columns: string[];
  /** `dedupe: table`: the columns of the event's source and id, the table's unique key. */
  private readonly identity?: { source: string; id: string };
  private readonly sinkName: string;
  private readonly ledger: string;
  /** Upsert: the `ON CONFLICT ... DO UPDATE` clause; append: empty. */
  private readonly upsert: string;
  /**
   * The batch's statement with one array parameter per column (`unnest`), each cast to its column's type as the
   * table has it, without the length or precision, which the insert applies (`columnTypesOf` in table-catalog.ts): one statement text whatever the batch, prepared once per connection, where a VALUES list has a
   * parameter per value and a text per batch size (Postgres parses and plans each). Learned at the first write and
   * again after a write that failed (the table may have changed); null when a column is an array (unnest would
   * flatten it), which takes a transaction of two statements, the rows as a VALUES list. A table or column missing
   * fails the write as transient ({@link requireColumns}).
   */
  private bulk: { text: string; name: string } | null | undefined;
  /** `dedupe: table`: the statement for the table as it is now, learned as {@link bulk} is. */
  private identified?: IdentifiedStatement;
  /**
   * How each column takes its values, learned with the statement: an array column's as arrays (not as JSON text), a
   * JSON column's every value as JSON text (a string as a JSON string).
   */
  private valueKinds = new Map<string, ValueKind>();
  /** With a ledger retention: the timer of the periodic prune, and the prune running. */
  private pruneTimer?: NodeJS.Timeout;
  private pruning?: Promise<number>;
  private closed = false;

  constructor(
    private readonly config: TableConfig,
    private readonly pool: Pool,
  ) {
    this.columns = Object.keys(config.columns);
    const columnOf = (value: ColumnValue) => this.columns.find((c) => config.columns[c] === value)!;
    if (config.dedupe === 'table') this.identity = { source: columnOf('source'), id: columnOf('id') };
    this.exactlyOnce = this.identity
      ? 'each event’s (source, id) is the table’s unique key: its row is inserted unless the table holds one with that key; the delivery is acked after the commit'
      : 'each event’s (source, id) is inserted into the ledger table in the same transaction as its row; an event the ledger already holds writes nothing; the delivery is acked after the commit';
    this.sinkName = `${config.table.schema}.${config.table.table}`;
    this.ledger = `${quoted(config.table.schema)}.${LEDGER}`;
    // Upsert: the columns beyond the key are replaced; with none beyond it, the row with that key is the row.
    const replaced = this.columns.filter((c) => config.mode === 'upsert' && !config.key.includes(c));
    this.upsert =
      config.mode !== 'upsert'
        ? ''
        : ` ON CONFLICT (${config.key.map(quoted).join(', ')}) ${
            replaced.length === 0
              ? 'DO NOTHING'
              : `DO UPDATE SET ${replaced.map((c) => `${quoted(c)} = EXCLUDED.${quoted(c)}`).join(', ')}`
          }`;
  }

  static async open(config: TableConfig, address: string): Promise<TableSink> {
    const pool = poolFor(config.connection, address, 4);
    const sink = new TableSink(config, pool);
    const client = await pool.connect();
    try {
      if (sink.identity) await requireIdentityIndex(client, config, sink.identity);
      else await createLedger(client, config.table.schema, config.ledgerRetentionHours > 0);
    } catch (e) {
      client.release();
      await pool.end();
      throw e;
    }
    client.release();
    if (config.ledgerRetentionHours > 0) sink.startPruning(PRUNE_FIRST_MS, PRUNE_EVERY_MS);
    return sink;
  }

  /**
   * Deletes this sink's ledger rows older than its retention (`ledgerRetentionHours`; none when it keeps them for
   * good), in statements of at most {@link PRUNE_CHUNK} rows so no transaction holds many row locks for long; the
   * number of rows deleted. A row deleted while its event is redelivered: the delivery waits for the delete, then
   * writes the event again, as any delivery past the retention does.
   */
  prune(): Promise<number> {
    // One at a time, and the one running is what a close waits for.
    return (this.pruning ??= this.pruneAll().finally(() => (this.pruning = undefined)));
  }

  private async pruneAll(): Promise<number> {
    const hours = this.config.ledgerRetentionHours;
    if (hours <= 0) return 0;
    let deleted = 0;
    // A closing sink stops between statements: its close waits for one, not for a whole backlog.
    while (!this.closed) {
      const { rowCount } = await this.pool.query(
        `DELETE FROM ${this.ledger} WHERE key = ANY(ARRAY(
           SELECT key FROM ${this.ledger}
            WHERE sink = $1 AND applied_at < now() - make_interval(hours => $2)
            LIMIT ${PRUNE_CHUNK}))`,
        [this.sinkName, hours],
      );
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < PRUNE_CHUNK) break;
    }
    return deleted;
  }

  /**
   * Prunes `firstMs` after the open (a sink opened briefly, as a dead letter's replay opens one, never prunes) and
   * then every `everyMs`, one prune at a time; a prune that fails is logged and tried again at the next.
   */
  private startPruning(firstMs: number, everyMs: number): void {
    const run = () =>
      void this.prune().catch((e: unknown) =>
        log.warn(
          { sink: this.sinkName, error: (e as Error).message },
          "pruning the sink's ledger failed; trying again at the next prune",
        ),
      );
    this.pruneTimer = setTimeout(() => {
      run();
      this.pruneTimer = setInterval(run, everyMs).unref();
    }, firstMs).unref();
  }

  async put(events: CloudEvent<unknown>[]): Promise<PutOutcome[]> {
    // A VALUES list has a parameter per value, and a statement takes at most MAX_PARAMETERS: a larger batch is
    // written in parts, in order, each its own statement.
    const most = Math.floor(MAX_PARAMETERS / this.columns.length);
    if (events.length > most) {
      const outcomes: PutOutcome[] = [];
      for (let i = 0; i < events.length; i += most) outcomes.push(...(await this.put(events.slice(i, i + most))));
      return outcomes;
    }
    try {
      return await this.write(events);
    } catch (e) {
      if (!isPermanent(e) || events.length === 1) {
        const outcome: PutOutcome = { ok: false, permanent: isPermanent(e), reason: (e as Error).message };
        return events.map(() => outcome);
      }
    }
    // One event of the batch can never be written: each on its own, so only that one fails.
    const outcomes: PutOutcome[] = [];
    for (const event of events) outcomes.push(...(await this.put([event])));
    return outcomes;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.pruneTimer);
    await this.pruning?.catch(() => undefined);
    await this.pool.end();
  }

  private async write(events: CloudEvent<unknown>[]): Promise<PutOutcome[]> {
    if (this.identity) return this.writeIdentified(events, this.identity);
    const keys = events.map((e) => ledgerKeyOf(this.sinkName, e));
    const firstOf = firstOfEach(keys);
    const unique = [...firstOf.values()].map((i) => events[i]);
    const uniqueKeys = [...firstOf.keys()];
    return this.onClient(async (client) => {
      const bulk = await this.bulkOf(client);
      const taken = bulk
        ? await this.writeBulk(client, bulk, unique, uniqueKeys)
        : await this.writeListed(client, unique, uniqueKeys);
      return events.map((_, i) => ({ ok: true, written: firstOf.get(keys[i]) === i && taken.has(keys[i]) }));
    });
  }

  /** Runs a write on a pooled connection; one Postgres refused for good has the statement learned again. */
  private async onClient<T>(write: (client: PoolClient) => Promise<T>): Promise<T> {
    const client: PoolClient = await this.pool.connect();
    try {
      return await write(client);
    } catch (e) {
      // The table may have changed: the statement is learned again at the next write.
      this.bulk = this.identified = undefined;
      throw e;
    } finally {
      client.release();
    }
  }

  /**
   * `dedupe: table`: the batch's first event of each (source, id) inserted by one statement, `ON CONFLICT DO
   * NOTHING` on the table's unique index on those columns; an event is written when its row went in.
   */
  private async writeIdentified(
    events: CloudEvent<unknown>[],
    identity: { source: string; id: string },
  ): Promise<PutOutcome[]> {
    const firstOf = firstOfEach(events.map((e) => JSON.stringify([e.source, e.id])));
    const unique = [...firstOf.values()];
    return this.onClient(async (client) => {
      const statement = (this.identified ??= await this.identifiedStatementOf(client, identity));
      const rows = unique.map((i) => this.columns.map((c) => this.valueIn(events[i], c)));
      const { rows: returned } = await client
        .query<string[]>({ ...statement.of(rows), rowMode: 'array' })
        .catch((e: unknown) => {
          // The index the sink opened on is gone (42P10) or was made deferrable (55000): transient (`columnTypesOf` in
          // isPermanent}), said as the setting it breaks.
          const code = (e as { code?: string }).code;
          if (code !== '42P10' && code !== '55000') throw e;
          throw new Error(`config.dedupe: table ${this.sinkName}: ${(e as Error).message}`);
        });
      // Exact columns return the event's own (source, id); the others the event's place in the batch.
      const written = new Set(
        statement.byValue
          ? returned.map(([s, i]) => firstOf.get(JSON.stringify([s, i])))
          : returned.map(([n]) => unique[Number(n) - 1]),
      );
      return events.map((_, i): PutOutcome => ({ ok: true, written: written.has(i) }));
    });
  }

  /**
   * The `dedupe: table` statement for the table as it is now: the batch's rows, each value cast to its column's
   * type without the length or precision (the insert applies them), inserted `ON CONFLICT DO NOTHING` on the
   * identity columns, and which of the batch's events went in. The rows go as arrays, one per column (`unnest`: one
   * statement text, prepared once per connection), or, when a column is itself an array (which `unnest` would
   * flatten), as a VALUES list (a text per batch size). When both identity columns are exact (`columnTypesOf` in
   * table-catalog.ts), the rows returned are the events' own (source, id), matched in the sink; otherwise the statement
   * joins them back to the events' places in the batch as the column types compare them (two events the column type
   * sees as one, such as a uuid's two cases, are one row, written by the first), which costs Postgres about a third
   * more per row, each event's values cast to their columns' declared types in the join as the insert casts them (a
   * `varchar(4)` column stores 'ab   ' as 'ab  '). A table or column missing is a transient failure (`columnTypesOf` in
   * requireColumns}).
   */
  private async identifiedStatementOf(
    client: PoolClient,
    identity: { source: string; id: string },
  ): Promise<IdentifiedStatement> {
    const types = await requireColumns(client, this.config, this.columns);
    this.valueKinds = valueKindsOf(types);
    const typeOf = (c: string) => types.get(c)!.type;
    const listed = this.columns.some((c) => types.get(c)!.array);
    const cols = this.columns.map((_, i) => `c${i}`);
    const colOf = (column: string) => cols[this.columns.indexOf(column)];
    const insert = `INSERT INTO ${qualified(this.config.table)} (${this.columns.map(quoted).join(', ')})`;
    const conflict = `ON CONFLICT (${quoted(identity.source)}, ${quoted(identity.id)}) DO NOTHING`;
    const byValue = types.get(identity.source)!.exact && types.get(identity.id)!.exact;
    // The batch as rows of cast values with their place in it (`n`, from 1): arrays and `unnest`, or a VALUES list.
    const arrays = this.columns.map((c, i) => `$${i + 1}::${typeOf(c)}[]`).join(', ');
    const valuesList = (rows: unknown[][]) =>
      rows
        .map(
          (_, r) => `(${this.columns.map((c, i) => `$${r * cols.length + i + 1}::${typeOf(c)}`).join(', ')}, ${r + 1})`,
        )
        .join(', ');
    const text = (source: string) =>
      byValue
        ? `${insert} SELECT ${cols.join(', ')} FROM ${source} ${conflict} RETURNING ${quoted(identity.source)}, ${quoted(identity.id)}`
        : `WITH e AS (SELECT * FROM ${source}),
      put AS (
        ${insert} SELECT ${cols.join(', ')} FROM e
        ${conflict}
        RETURNING ${quoted(identity.source)} AS s, ${quoted(identity.id)} AS i)
      SELECT DISTINCT ON (put.s, put.i) e.n FROM e
        JOIN put ON put.s = e.${colOf(identity.source)}::${types.get(identity.source)!.declared}
                AND put.i = e.${colOf(identity.id)}::${types.get(identity.id)!.declared}
       ORDER BY put.s, put.i, e.n`;
    const rowsAs = `AS e(${cols.join(', ')}, n)`;
    if (listed)
      return { byValue, of: (rows) => ({ text: text(`(VALUES ${valuesList(rows)}) ${rowsAs}`), values: rows.flat() }) };
    const bulk = prepared(text(`unnest(${arrays}) WITH ORDINALITY ${rowsAs}`));
    return { byValue, of: (rows) => ({ ...bulk, values: this.columns.map((_, i) => rows.map((row) => row[i])) }) };
  }

  /** The ledger rows and the table rows in one statement ({@link bulk}); the keys the ledger took. */
  private async writeBulk(
    client: PoolClient,
    bulk: { text: string; name: string },
    events: CloudEvent<unknown>[],
    keys: string[],
  ): Promise<Set<string>> {
    const values = [
      ...this.ledgerParams(events, keys),
      ...this.columns.map((c) => events.map((e) => this.valueIn(e, c))),
    ];
    const { rows } = await client.query<{ key: string }>({ name: bulk.name, text: bulk.text, values });
    return new Set(rows.map((r) => r.key));
  }

  /** The ledger rows, then the table rows as a VALUES list, in one transaction; the keys the ledger took. */
  private async writeListed(client: PoolClient, events: CloudEvent<unknown>[], keys: string[]): Promise<Set<string>> {
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ key: string }>(
        `INSERT INTO ${this.ledger} (key, sink, source, id)
         SELECT k, $1, s, i FROM unnest($2::uuid[], $3::text[], $4::text[]) AS e(k, s, i)
         ON CONFLICT DO NOTHING RETURNING key`,
        this.ledgerParams(events, keys),
      );
      const taken = new Set(rows.map((r) => r.key));
      let fresh = events.filter((_, i) => taken.has(keys[i]));
      if (this.config.mode === 'upsert') fresh = lastOfEachKey(fresh, (e) => this.upsertKeyOf(e));
      if (fresh.length) {
        const params: unknown[] = [];
        const tuples = fresh.map((e) => {
          const values = this.columns.map((c) => {
            params.push(this.valueIn(e, c));
            return `$${params.length}`;
          });
          return `(${values.join(', ')})`;
        });
        await client.query(
          `INSERT INTO ${qualified(this.config.table)} (${this.columns.map(quoted).join(', ')}) VALUES ${tuples.join(', ')}${this.upsert}`,
          params,
        );
      }
      await client.query('COMMIT');
      return taken;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    }
  }

  /** The ledger's parameters, `$1` to `$4` of both writes: the sink, then the events' keys, sources and ids. */
  private ledgerParams(events: CloudEvent<unknown>[], keys: string[]): unknown[] {
    return [this.sinkName, keys, events.map((e) => e.source), events.map((e) => e.id)];
  }

  /** The event's value for `column`, as the column takes it ({@link valueKinds}). */
  private valueIn(event: CloudEvent<unknown>, column: string): unknown {
    return valueOf(event, this.config.columns[column], this.valueKinds.get(column) ?? 'plain');
  }

  /** The event's upsert key as text; undefined when a part of it is NULL (no key: the event is a row of its own). */
  private upsertKeyOf(event: CloudEvent<unknown>): string | undefined {
    const values = this.config.key.map((c) => this.valueIn(event, c));
    return values.includes(null) ? undefined : JSON.stringify(values);
  }

  /**
   * The one-statement write for the table as it is now ({@link bulk}), learned on `client` the first time: the
   * batch as rows of arrays (key, source, id, then a column each, with their place in the batch), the ledger rows
   * inserted from them, and the table rows of the events the ledger took. Upsert: one row per key, the batch's last.
   */
  private async bulkOf(client: PoolClient): Promise<{ text: string; name: string } | null> {
    if (this.bulk !== undefined) return this.bulk;
    const types = await requireColumns(client, this.config, this.columns);
    this.valueKinds = valueKindsOf(types);
    const usable = this.columns.every((c) => !types.get(c)!.array);
    if (!usable) return (this.bulk = null);
    const cols = this.columns.map((_, i) => `c${i}`);
    const keyCols = this.config.key.map((k) => cols[this.columns.indexOf(k)]);
    // A key with a NULL in it is no key (a unique index lets such rows be): each of those events is its own row.
    const distinct = [...keyCols, `CASE WHEN ${keyCols.map((c) => `${c} IS NULL`).join(' OR ')} THEN e.n END`];
    const rowsOf =
      this.config.mode === 'upsert'
        ? `SELECT DISTINCT ON (${distinct.join(', ')}) ${cols.join(', ')} FROM e JOIN taken t ON t.key = e.k
            ORDER BY ${distinct.join(', ')}, e.n DESC`
        : `SELECT ${cols.join(', ')} FROM e JOIN taken t ON t.key = e.k`;
    const text = `WITH e AS (
        SELECT * FROM unnest($2::uuid[], $3::text[], $4::text[], ${this.columns
          .map((c, i) => `$${i + 5}::${types.get(c)!.type}[]`)
          .join(', ')}) WITH ORDINALITY AS e(k, s, i, ${cols.join(', ')}, n)),
      taken AS (
        INSERT INTO ${this.ledger} (key, sink, source, id) SELECT k, $1, s, i FROM e
        ON CONFLICT DO NOTHING RETURNING key),
      put AS (
        INSERT INTO ${qualified(this.config.table)} (${this.columns.map(quoted).join(', ')}) ${rowsOf}${this.upsert})
      SELECT key FROM taken`;
    return (this.bulk = prepared(text));
  }
}

/**
 * A `dedupe: table` statement: `of` makes the query for a batch's rows (each the values of the columns in order);
 * it returns the rows' (source, id) when `byValue`, else their places in the batch.
 */
type IdentifiedStatement = {
  byValue: boolean;
  of: (rows: unknown[][]) => { text: string; name?: string; values: unknown[] };
};

/**
 * A statement to prepare, named by its text: prepared statements are per connection and by name, so a changed
 * table (another text) gets a new one.
 */
function prepared(text: string): { text: string; name: string } {
  return { text, name: `eventmesh_sink_${createHash('sha256').update(text).digest('hex').slice(0, 24)}` };
}

/** Each key's first place in `keys`: the same event twice in one batch is written once, by its first. */
function firstOfEach(keys: string[]): Map<string, number> {
  const first = new Map<string, number>();
  keys.forEach((k, i) => first.has(k) || first.set(k, i));
  return first;
}

/** The last of each key's items, in the order of those last items; an item without a key is kept as it is. */
function lastOfEachKey<T>(items: T[], keyOf: (item: T) => string | undefined): T[] {
  const last = new Map<string | T, T>();
  for (const item of items) {
    const key = keyOf(item) ?? item;
    last.delete(key);
    last.set(key, item);
  }
  return [...last.values()];
}

/**
 * A write Postgres refused for what it was sent (a value of the wrong type, a constraint, one statement updating a
 * row twice, a value past a limit such as an index row's size, a trigger's RAISE): it fails again however often it
 * is tried, and the batch goes event by event to find the event to dead-letter. Anything else (a dropped
 * connection, a server restarting, a serialization failure, a lock timeout) may pass the next time. So may what
 * is wrong with the table rather than with an event, which counted permanent would dead-letter every one: the
 * table, a column or the role's privilege on it missing (42P01, 42703, 42501: it may be made or granted), an `ON
 * CONFLICT` that no unique index matches (42P10: the upsert key's or dedupe's index dropped since the job opened)
 * or cannot use (55000: made deferrable).
 */
export function isPermanent(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  if (typeof code !== 'string' || code.length !== 5 || TABLE_NOT_AS_MADE.has(code)) return false;
  return ['21', '22', '23', '42', '2B', '44', '54', 'P0'].includes(code.slice(0, 2));
}

/** SQLSTATEs of a table not as the job was made for, in classes {@link isPermanent} otherwise counts permanent. */
const TABLE_NOT_AS_MADE = new Set(['42P01', '42703', '42501', '42P10']);

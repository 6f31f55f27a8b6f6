import type { CloudEvent } from '@eventmesh/client';
import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import type { PutOutcome, SinkConnector } from '../../spi';
import { poolFor, qualified, quoted } from '../config-fields';
import type { ColumnValue, TableConfig } from './table-config';

/** The ledger of applied events, beside the target table (same database, same transaction as the rows). */
const LEDGER = 'eventmesh_applied_events';

/**
 * A table as a sink. Each batch is one transaction: the events' (source, id) go into the ledger first (`ON CONFLICT
 * DO NOTHING RETURNING`), and only the events the ledger took are written as rows. A redelivered event (its ack
 * lost to a crash) finds its ledger row and writes nothing, in append mode too; two replicas writing the same
 * event at once serialize on the ledger row's unique key, and the second writes nothing. The ack to the runtime
 * follows the commit, so a crash between them means a redelivery, which the ledger absorbs.
 */
export class TableSink implements SinkConnector {
  readonly exactlyOnce =
    'each event’s (source, id) is inserted into the ledger table in the same transaction as its row; an event the ledger already holds writes nothing; the delivery is acked after the commit';
  private readonly columns: string[];
  private readonly insert: string;
  private readonly upsert: string;
  private readonly sinkName: string;
  /**
   * The rows' statement with one array parameter per column (`unnest`), each cast to its column's type as the table
   * has it: one statement text whatever the batch, prepared once per connection, where a VALUES list has a
   * parameter per value and a text per batch size (Postgres parses and plans each). Learned at the first write and
   * again after a write Postgres refused (the table may have changed); null when a column is missing or is an array
   * (unnest would flatten it), which take the VALUES list.
   */
  private bulk: { text: string; name: string } | null | undefined;

  constructor(
    private readonly config: TableConfig,
    private readonly pool: Pool,
  ) {
    this.columns = Object.keys(config.columns);
    this.sinkName = `${config.table.schema}.${config.table.table}`;
    const upsert =
      config.mode === 'upsert'
        ? ` ON CONFLICT (${config.key.map(quoted).join(', ')}) DO UPDATE SET ${this.columns
            .filter((c) => !config.key.includes(c))
            .map((c) => `${quoted(c)} = EXCLUDED.${quoted(c)}`)
            .join(', ')}`
        : '';
    this.upsert = upsert;
    this.insert = `INSERT INTO ${qualified(config.table)} (${this.columns.map(quoted).join(', ')}) VALUES %VALUES%${upsert}`;
  }

  static async open(config: TableConfig, address: string): Promise<TableSink> {
    const pool = poolFor(config.connection, address, 4);
    await pool.query(
      `CREATE TABLE IF NOT EXISTS ${quoted(config.table.schema)}.${LEDGER} (
         sink text NOT NULL, source text NOT NULL, id text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (sink, source, id))`,
    );
    return new TableSink(config, pool);
  }

  async put(events: CloudEvent<unknown>[]): Promise<PutOutcome[]> {
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

  close(): Promise<void> {
    return this.pool.end();
  }

  private async write(events: CloudEvent<unknown>[]): Promise<PutOutcome[]> {
    const client: PoolClient = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const taken: { source: string; id: string }[] = (
        await client.query(
          `INSERT INTO ${quoted(this.config.table.schema)}.${LEDGER} (sink, source, id)
           SELECT $1, s, i FROM unnest($2::text[], $3::text[]) AS u(s, i)
           ON CONFLICT DO NOTHING RETURNING source, id`,
          [this.sinkName, events.map((e) => e.source), events.map((e) => e.id)],
        )
      ).rows;
      const isNew = new Set(taken.map((t) => `${t.source}\u0000${t.id}`));
      const fresh: CloudEvent<unknown>[] = [];
      for (const e of events) {
        // The same event twice in one batch: the ledger took it once, and it is written once.
        if (isNew.delete(`${e.source}\u0000${e.id}`)) fresh.push(e);
      }
      const written = new Set(fresh);
      const bulk = fresh.length > 0 ? await this.bulkOf(client) : null;
      if (bulk) {
        const columns = this.columns.map((c) => fresh.map((e) => valueOf(e, this.config.columns[c])));
        await client.query({ name: bulk.name, text: bulk.text, values: columns });
      } else if (fresh.length) {
        const params: unknown[] = [];
        const tuples = fresh.map((e) => {
          const values = this.columns.map((c) => {
            params.push(valueOf(e, this.config.columns[c]));
            return `$${params.length}`;
          });
          return `(${values.join(', ')})`;
        });
        await client.query(this.insert.replace('%VALUES%', tuples.join(', ')), params);
      }
      await client.query('COMMIT');
      return events.map((e) => ({ ok: true, written: written.has(e) }));
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      if (isPermanent(e)) this.bulk = undefined;
      throw e;
    } finally {
      client.release();
    }
  }

  /** The `unnest` statement for the table as it is now ({@link bulk}), learned on `client` the first time. */
  private async bulkOf(client: PoolClient): Promise<{ text: string; name: string } | null> {
    if (this.bulk !== undefined) return this.bulk;
    const { rows } = await client.query<{ name: string; type: string; array: boolean }>(
      `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
              (t.typcategory = 'A' OR a.attndims > 0) AS array
         FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
        WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`,
      [qualified(this.config.table)],
    );
    const types = new Map(rows.map((r) => [r.name, r]));
    const usable = this.columns.every((c) => types.get(c)?.array === false);
    if (!usable) return (this.bulk = null);
    const text = `INSERT INTO ${qualified(this.config.table)} (${this.columns.map(quoted).join(', ')}) SELECT * FROM unnest(${this.columns
      .map((c, i) => `$${i + 1}::${types.get(c)!.type}[]`)
      .join(', ')})${this.upsert}`;
    // Prepared statements are per connection and by name: a name per text, so a changed table gets a new one.
    return (this.bulk = {
      text,
      name: `eventmesh_sink_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`,
    });
  }
}

function valueOf(event: CloudEvent<unknown>, value: ColumnValue): unknown {
  let v: unknown;
  if (value === 'data') v = event.data;
  else if (value.startsWith('data.')) {
    v = event.data;
    for (const key of value.slice(5).split('.'))
      v = typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[key] : undefined;
  } else v = (event as unknown as Record<string, unknown>)[value];
  if (v === undefined) return null;
  return typeof v === 'object' && v !== null && !(v instanceof Date) && !Buffer.isBuffer(v) ? JSON.stringify(v) : v;
}

/**
 * A write Postgres refused for what it was sent (a value of the wrong type, a constraint, a column missing): it
 * fails again however often it is tried. Anything else (a dropped connection, a server restarting, a serialization
 * failure, a lock timeout) may pass the next time.
 */
export function isPermanent(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  if (typeof code !== 'string' || code.length !== 5) return false;
  return ['22', '23', '42', '2B', '44'].includes(code.slice(0, 2));
}

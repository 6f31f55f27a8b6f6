import type { Pool } from 'pg';
import type { PollResult, SourceConnector, SourceRecord } from '../../spi';
import { poolFor, qualified, quoted } from '../config-fields';
import type { OutboxConfig } from './outbox-config';

/** A topic name the runtime can take (its own check decides at publish; this one catches a broken route early). */
const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;

/**
 * The transactional outbox as a source. Rows are read in the order of (writing transaction, id), and only rows
 * whose transaction id is below the xmin of the current snapshot: every transaction below it has ended, and every
 * transaction that has not yet written gets a larger id, so the set of rows before the position can never grow.
 * A row inserted by a transaction still open, whatever its id, is read after that transaction ends, never skipped
 * (the cost: an open transaction holds back every row written after it started, cluster-wide). The order is the id
 * column's own (a bigint's numeric order, not its text's), so a poll is a range scan of the `(txid, id)` index that
 * stops after its batch: never a sort of the whole backlog after the position.
 *
 * The position is `<txid>:<id>` of the last row read. Each row's event id is its id column and its source is fixed
 * per row, so a row read again after a crash (published, not yet committed) is the same event: the SDK's dedupe
 * and every consumer see it once.
 */
export class OutboxSource implements SourceConnector {
  readonly exactlyOnce =
    'rows read in (txid, id) order below the snapshot xmin, so none is skipped; event id = the row id, so a re-read row is the same event; the position is committed only after the runtime acknowledged';
  private readonly select: string;
  private readonly columns: string;

  constructor(
    private readonly config: OutboxConfig,
    private readonly pool: Pool,
  ) {
    const c = config.columns;
    const wanted = [c.aggregateType, c.aggregateId, c.type, c.payload, c.source, c.subject, c.topic];
    // Every column as text, as Postgres writes it: the payload parsed once here (a jsonb string stays a string), an
    // aggregate id of any type its text (a jsonb, a timestamp as the server writes it).
    this.columns = [...new Set(wanted.filter((x): x is string => x !== undefined))]
      .map((column) => `${quoted(column)}::text AS ${quoted(column)}`)
      .join(', ');
    this.select = `SELECT ${quoted(c.txid)}::text AS "__txid", ${quoted(c.id)}::text AS "__id", ${this.columns}
      FROM ${qualified(config.table)}`;
  }

  /**
   * Refuses a table whose id column allows NULL: a row without an id has no place in the `(txid, id)` order, and
   * a position after it could not be read back.
   */
  static async open(config: OutboxConfig, address: string): Promise<OutboxSource> {
    const pool = poolFor(config.connection, address, 2);
    try {
      const { rows } = await pool.query<{ notnull: boolean }>(
        `SELECT attnotnull AS notnull FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped`,
        [qualified(config.table), config.columns.id],
      );
      if (rows[0] && !rows[0].notnull)
        throw new Error(
          `columns.id: ${config.columns.id} of ${qualified(config.table)} allows NULL; the outbox's id column must be NOT NULL (its primary key)`,
        );
    } catch (e) {
      await pool.end();
      throw e;
    }
    return new OutboxSource(config, pool);
  }

  async poll(position: string | undefined, max: number): Promise<PollResult> {
    const after = parsePosition(position);
    const c = this.config.columns;
    const rows: Record<string, unknown>[] = (
      await this.pool.query(
        `${this.select}
         WHERE ${quoted(c.txid)} < pg_snapshot_xmin(pg_current_snapshot())
           ${after ? `AND (${quoted(c.txid)}, ${quoted(c.id)}) > ($2::xid8, $3)` : ''}
         ORDER BY ${quoted(c.txid)}, ${quoted(c.id)} LIMIT $1`,
        after ? [max, after.txid, after.id] : [max],
      )
    ).rows;
    if (rows.length === 0) return { records: [] };
    const last = rows[rows.length - 1];
    return { records: rows.map((r) => this.recordOf(r)), position: `${String(last.__txid)}:${String(last.__id)}` };
  }

  async committed(position: string): Promise<void> {
    if (!this.config.deletePublished) return;
    const p = parsePosition(position)!;
    const c = this.config.columns;
    await this.pool.query(
      `DELETE FROM ${qualified(this.config.table)} WHERE (${quoted(c.txid)}, ${quoted(c.id)}) <= ($1::xid8, $2)`,
      [p.txid, p.id],
    );
  }

  async lag(position: string | undefined): Promise<number> {
    const p = parsePosition(position);
    const c = this.config.columns;
    const rows: { n: string }[] = (
      await this.pool.query(
        `SELECT count(*) AS n FROM ${qualified(this.config.table)}
         ${p ? `WHERE (${quoted(c.txid)}, ${quoted(c.id)}) > ($1::xid8, $2)` : ''}`,
        p ? [p.txid, p.id] : [],
      )
    ).rows;
    return Number(rows[0].n);
  }

  close(): Promise<void> {
    return this.pool.end();
  }

  /** The row as an event, or why it cannot be one (dead-lettered; the position moves past it all the same). */
  private recordOf(row: Record<string, unknown>): SourceRecord {
    const c = this.config.columns;
    const type = row[c.type];
    if (typeof type !== 'string' || type === '')
      return { ok: false, reason: `column ${c.type}: no event type`, raw: rawOf(row) };
    const aggregateType = row[c.aggregateType];
    const routed =
      c.topic && typeof row[c.topic] === 'string' && row[c.topic] !== '' ? (row[c.topic] as string) : undefined;
    const topic =
      routed ??
      (typeof aggregateType === 'string' && aggregateType !== ''
        ? this.config.topicTemplate.split('${aggregateType}').join(aggregateType)
        : undefined);
    if (!topic || !TOPIC.test(topic))
      return {
        ok: false,
        reason: `no valid destination topic (${c.topic ?? c.aggregateType}: ${String(topic)})`,
        raw: rawOf(row),
      };
    const source =
      (c.source && typeof row[c.source] === 'string' && (row[c.source] as string)) || this.config.defaultSource;
    const aggregateId = row[c.aggregateId];
    const subject =
      (c.subject && typeof row[c.subject] === 'string' && (row[c.subject] as string)) || stringOf(aggregateId);
    // The payload's text (json, jsonb, or text holding JSON), parsed once; NULL is no data.
    const text = row[c.payload];
    let data: unknown = null;
    if (typeof text === 'string') {
      try {
        data = JSON.parse(text);
      } catch {
        return { ok: false, reason: `column ${c.payload}: not JSON`, raw: rawOf(row) };
      }
    }
    return {
      ok: true,
      topic,
      event: {
        // Complete as the JSON format needs it (specversion included), the SDK writes it without a copy.
        specversion: '1.0',
        id: String(row.__id),
        source,
        type,
        subject,
        datacontenttype: 'application/json',
        data,
        // Events of one aggregate share a Kafka partition, so they are delivered in the order they were written.
        ...(aggregateId === null || aggregateId === undefined ? {} : { partitionkey: stringOf(aggregateId) }),
      },
    };
  }
}

/** `<txid>:<id>`; anything else is refused with the form it needs (a reset position an operator mistyped). */
export function parsePosition(position: string | undefined): { txid: string; id: string } | undefined {
  if (!position) return undefined;
  const at = position.indexOf(':');
  if (at <= 0 || !/^\d+$/.test(position.slice(0, at)))
    throw new Error(
      `position ${JSON.stringify(position)} is not <txid>:<id> (a transaction id, a colon, the row's id)`,
    );
  return { txid: position.slice(0, at), id: position.slice(at + 1) };
}

function stringOf(v: unknown): string | undefined {
  return v === null || v === undefined ? undefined : String(v);
}

function rawOf(row: Record<string, unknown>): Record<string, unknown> {
  const { __txid, __id, ...rest } = row;
  return { txid: __txid, id: __id, ...rest };
}

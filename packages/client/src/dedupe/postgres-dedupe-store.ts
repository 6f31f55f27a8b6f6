import { DEDUPE_DEFAULTS, type DedupeBounds, type DedupeStore } from './dedupe-store';

/** What the store needs of a Postgres client: a `pg` `Pool` or `Client` (or anything with `query`). */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

export interface PostgresDedupeOptions extends DedupeBounds {
  /** A `pg` Pool or Client the store uses (and does not end). Else `connectionString` makes one (`pg` is an optional peer dependency). */
  pool?: Queryable;
  connectionString?: string;
  /** Its table, made when missing (default `eventmesh_dedupe`); one table may serve several consumers. */
  table?: string;
  /** Every this many records, rows past the age and count bounds are deleted (default 100). */
  pruneEvery?: number;
}

/**
 * A dedupe store in Postgres, for consumers that restart: a redelivery after the restart of an event the handler
 * finished before it is still acked as a duplicate. One row per (source, id) with when it was recorded; `seen`
 * ignores rows older than `maxAgeMs`, and every `pruneEvery` records the rows past either bound are deleted.
 */
export class PostgresDedupeStore implements DedupeStore {
  private readonly bounds: Required<DedupeBounds>;
  private readonly table: string;
  private db: Promise<Queryable> | undefined;
  private owned: { end(): Promise<void> } | undefined;
  private records = 0;

  constructor(private readonly options: PostgresDedupeOptions) {
    this.bounds = { ...DEDUPE_DEFAULTS, ...options };
    this.table = options.table ?? 'eventmesh_dedupe';
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(this.table))
      throw new Error(`table: ${this.table} is not a plain lower-case SQL name`);
  }

  async seen(source: string, id: string): Promise<boolean> {
    const db = await this.connect();
    const { rows } = await db.query(
      `SELECT 1 FROM ${this.table} WHERE source = $1 AND id = $2 AND recorded_at > now() - make_interval(secs => $3)`,
      [source, id, this.bounds.maxAgeMs / 1000],
    );
    return rows.length > 0;
  }

  async record(source: string, id: string): Promise<void> {
    const db = await this.connect();
    await db.query(
      `INSERT INTO ${this.table} (source, id) VALUES ($1, $2) ON CONFLICT (source, id) DO UPDATE SET recorded_at = now()`,
      [source, id],
    );
    if (++this.records % (this.options.pruneEvery ?? 100) === 0) await this.prune();
  }

  /** Deletes the rows older than `maxAgeMs` and those past the newest `maxEntries`. */
  async prune(): Promise<void> {
    const db = await this.connect();
    await db.query(`DELETE FROM ${this.table} WHERE recorded_at <= now() - make_interval(secs => $1)`, [
      this.bounds.maxAgeMs / 1000,
    ]);
    await db.query(
      `DELETE FROM ${this.table} WHERE (source, id) IN (SELECT source, id FROM ${this.table} ORDER BY recorded_at DESC OFFSET $1)`,
      [this.bounds.maxEntries],
    );
  }

  async close(): Promise<void> {
    await this.owned?.end();
  }

  private connect(): Promise<Queryable> {
    return (this.db ??= (async () => {
      let db = this.options.pool;
      if (!db) {
        const pg = await import('pg');
        const pool = new pg.Pool({ connectionString: this.options.connectionString, max: 4 });
        this.owned = pool;
        db = pool;
      }
      await db.query(
        `CREATE TABLE IF NOT EXISTS ${this.table} (source text NOT NULL, id text NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (source, id))`,
      );
      await db.query(`CREATE INDEX IF NOT EXISTS ${this.table}_recorded_at ON ${this.table} (recorded_at)`);
      return db;
    })());
  }
}

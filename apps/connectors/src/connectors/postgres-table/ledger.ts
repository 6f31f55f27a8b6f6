import { hash } from 'node:crypto';
import type { PoolClient } from 'pg';
import { createLogger } from '@libs/logging';
import { quoted } from '../config-fields';

/**
 * The table sink's ledger of applied events (`dedupe: ledger`): a table beside the target table (same database,
 * same statement as the rows), one row per event written, keyed by {@link ledgerKeyOf}.
 */
export const LEDGER = 'eventmesh_sink_ledger';

const log = createLogger('TableSink');

/**
 * An event's key in the ledger: the first 128 bits of SHA-256 over its sink, source and id (as a JSON array, so no
 * two triples share a text), as a UUID. One fixed-width column indexes in a fraction of the time three texts
 * compared by collation take.
 */
export function ledgerKeyOf(sink: string, event: { source: string; id: string }): string {
  const h = hash('sha256', JSON.stringify([sink, event.source, event.id]), 'hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * The ledger beside the tables of `schema`, made once under a lock (replicas open sinks at once). A ledger of the
 * layout before this one (`eventmesh_applied_events`, keyed by the three texts) is copied in with the same keys
 * ({@link ledgerKeyOf}, computed by Postgres over the same JSON text), so an event applied under it still writes
 * nothing; replicas of that earlier version must be stopped first (they write only to the earlier table).
 */
export async function createLedger(client: PoolClient, schema: string, pruned: boolean): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`eventmesh-sink-ledger:${schema}`]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${quoted(schema)}.${LEDGER} (
         key uuid PRIMARY KEY, sink text NOT NULL, source text NOT NULL, id text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    if (pruned) await createPruneIndex(client, schema);
    if (await exists(client, `${quoted(schema)}.${EARLIER_LEDGER}`))
      await client.query(
        `INSERT INTO ${quoted(schema)}.${LEDGER} (key, sink, source, id, applied_at)
         SELECT ${sqlLedgerKeyOf('sink', 'source', 'id')}, sink, source, id, applied_at
           FROM ${quoted(schema)}.${EARLIER_LEDGER}
         ON CONFLICT DO NOTHING`,
      );
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}

/**
 * What a prune reads by, made by the first sink with a retention (an index only schemas with a pruning sink pay
 * for), by sink first, so a prune reads its own sink's old rows and not those of sinks that keep theirs. Looked up
 * first: CREATE INDEX locks the table and needs its owner even when the index exists. Made inside the ledger's
 * setup transaction, the first build holds the sinks' writes to the schema's ledger until it is done (once). A role
 * that does not own the ledger makes none, and its prunes read the whole ledger.
 */
async function createPruneIndex(client: PoolClient, schema: string): Promise<void> {
  const index = `${LEDGER}_sink_applied_at`;
  if (await exists(client, `${quoted(schema)}.${index}`)) return;
  await client.query('SAVEPOINT index');
  try {
    await client.query(`CREATE INDEX IF NOT EXISTS ${index} ON ${quoted(schema)}.${LEDGER} (sink, applied_at)`);
    await client.query('RELEASE SAVEPOINT index');
  } catch (e) {
    if ((e as { code?: string }).code !== '42501') throw e;
    await client.query('ROLLBACK TO SAVEPOINT index');
    log.warn({ schema, error: (e as Error).message }, "the sink's ledger has no index for its prunes");
  }
}

/** Whether a table or index of that (quoted, qualified) name exists. */
async function exists(client: PoolClient, name: string): Promise<boolean> {
  const { rows } = await client.query<{ found: string | null }>(`SELECT to_regclass($1)::text AS found`, [name]);
  return rows[0].found !== null;
}

/** The ledger of the layout before this one, read once by {@link createLedger}. */
const EARLIER_LEDGER = 'eventmesh_applied_events';

/**
 * {@link ledgerKeyOf} in SQL over three text expressions: `to_json` of a text writes what `JSON.stringify` of a
 * string does (quotes, backslashes and control characters escaped alike, other characters as they are).
 */
function sqlLedgerKeyOf(sink: string, source: string, id: string): string {
  const json = `'[' || to_json(${sink}::text)::text || ',' || to_json(${source}::text)::text || ',' || to_json(${id}::text)::text || ']'`;
  return `encode(substr(sha256(convert_to(${json}, 'UTF8')), 1, 16), 'hex')::uuid`;
}

import type { PoolClient } from 'pg';
import { qualified } from '../config-fields';
import type { TableConfig } from './table-config';

// What the table sink reads of its target table in the catalog.

/**
 * The table's columns as Postgres has them now: each one's type without its modifier (`character varying`, not
 * `character varying(40)`; `bpchar`, not `character`, which means `character(1)`): the batch's values are cast to
 * it, and the insert then applies the column's length or precision as any insert does, refusing a value too long,
 * where an explicit cast to `varchar(40)` would cut it to 40 silently. Also whether it is an array; whether it is
 * JSON (`json`, `jsonb` or a domain over one: every value goes as JSON text, a string as a JSON string); and whether
 * it keeps a string exactly as sent and compares it by its characters (`text` or `varchar` without a length, which
 * cuts the spaces past it, under a deterministic collation): what such a column returns is the string the event
 * had, and two strings are one value only when they are equal. And its whole type (`declared`, with the modifier):
 * a value cast to it explicitly is the value an insert stores (`varchar(4)` cuts the spaces past 4 either way).
 */
export async function columnTypesOf(client: PoolClient, config: TableConfig): Promise<Map<string, ColumnType>> {
  const { rows } = await client.query<ColumnType & { name: string }>(
    `SELECT a.attname AS name, format_type(a.atttypid, -1) AS type, format_type(a.atttypid, a.atttypmod) AS declared,
            (t.typcategory = 'A' OR a.attndims > 0) AS array,
            coalesce(nullif(t.typbasetype, 0), t.oid) IN ('json'::regtype, 'jsonb'::regtype) AS json,
            (a.atttypid IN ('text'::regtype, 'varchar'::regtype) AND a.atttypmod < 0
              AND coalesce(c.collisdeterministic, true)) AS exact
       FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
       LEFT JOIN pg_collation c ON c.oid = a.attcollation
      WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`,
    [qualified(config.table)],
  );
  return new Map(rows.map((r) => [r.name, r]));
}

/** A column as {@link columnTypesOf} reads it. */
export type ColumnType = { type: string; declared: string; array: boolean; json: boolean; exact: boolean };

/**
 * The table's columns ({@link columnTypesOf}) when it has every column the sink writes; otherwise an error naming
 * what is missing, which the sink reports as transient: no event is to blame, and the job writes again once the
 * table is made or altered.
 */
export async function requireColumns(
  client: PoolClient,
  config: TableConfig,
  columns: string[],
): Promise<Map<string, ColumnType>> {
  const types = await columnTypesOf(client, config);
  const name = `${config.table.schema}.${config.table.table}`;
  if (types.size === 0) throw new Error(`table ${name} not found (or the sink's role cannot see it)`);
  const missing = columns.filter((c) => !types.has(c));
  if (missing.length > 0) throw new Error(`table ${name} has no column ${missing.join(', ')}`);
  return types;
}

/**
 * `dedupe: table` holds only when the table has a unique index whose key is exactly the columns of the event's
 * source and id (valid, not partial, no expression; columns it only INCLUDEs do not count): with more columns in
 * its key, an event sent again with other data would be a second row; with only one of them, two sources' events of
 * one id would be one row. None of the unique indexes on that key may be deferrable: `ON CONFLICT` takes every one
 * of them as its arbiter and refuses a deferrable one at every insert. Refused otherwise, before anything is written.
 */
export async function requireIdentityIndex(
  client: PoolClient,
  config: TableConfig,
  identity: { source: string; id: string },
): Promise<void> {
  const { rows } = await client.query<{ immediate: boolean; deferrable: boolean }>(
    `SELECT coalesce(bool_or(i.indimmediate), false) AS immediate, coalesce(bool_or(NOT i.indimmediate), false) AS deferrable
       FROM pg_index i
      WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
        AND i.indexprs IS NULL AND i.indnkeyatts = 2
        AND ARRAY(SELECT a.attname::text FROM pg_attribute a
                   WHERE a.attrelid = i.indrelid AND a.attnum IN (i.indkey[0], i.indkey[1])) @> $2::text[]`,
    [qualified(config.table), [identity.source, identity.id]],
  );
  const name = `${config.table.schema}.${config.table.table}`;
  if (rows[0].deferrable)
    throw new Error(
      `config.dedupe: table ${name} has a deferrable unique index on (${identity.source}, ${identity.id}), which ON CONFLICT cannot use; dedupe table needs the index on those columns not deferrable`,
    );
  if (!rows[0].immediate)
    throw new Error(
      `config.dedupe: table ${name} has no unique index on exactly (${identity.source}, ${identity.id}), the columns of the event's source and id; dedupe table needs one (CREATE UNIQUE INDEX ... ON ${name} (${identity.source}, ${identity.id}))`,
    );
}

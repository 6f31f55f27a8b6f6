import { Pool } from 'pg';
import { ConfigFieldError } from '../spi';

/**
 * The readers every connector's `validate` uses: each takes the object it reads from and the field's path, and
 * refuses a wrong value naming that path (`source.columns.id: expected an SQL identifier`).
 */
export type Fields = Record<string, unknown>;

export function object(value: unknown, path: string): Fields {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ConfigFieldError(path, 'expected an object');
  return value as Fields;
}

export function text(o: Fields, path: string, key: string, fallback?: string): string {
  const v = o[key] ?? fallback;
  if (typeof v !== 'string' || v === '') throw new ConfigFieldError(join(path, key), 'expected a non-empty string');
  return v;
}

export function optionalText(o: Fields, path: string, key: string): string | undefined {
  return o[key] === undefined ? undefined : text(o, path, key);
}

export function integerIn(o: Fields, path: string, key: string, min: number, max: number, fallback: number): number {
  const v = o[key] ?? fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw new ConfigFieldError(join(path, key), `expected an integer from ${min} to ${max}`);
  return v;
}

export function flag(o: Fields, path: string, key: string, fallback: boolean): boolean {
  const v = o[key] ?? fallback;
  if (typeof v !== 'boolean') throw new ConfigFieldError(join(path, key), 'expected true or false');
  return v;
}

export function oneOf<T extends string>(o: Fields, path: string, key: string, values: readonly T[], fallback: T): T {
  const v = o[key] ?? fallback;
  if (typeof v !== 'string' || !(values as readonly string[]).includes(v))
    throw new ConfigFieldError(join(path, key), `expected one of ${values.join(', ')}`);
  return v as T;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** A lower-case SQL identifier (a table or column name), quoted wherever it is used. */
export function identifier(o: Fields, path: string, key: string, fallback?: string): string {
  const v = o[key] ?? fallback;
  if (typeof v !== 'string' || !IDENTIFIER.test(v))
    throw new ConfigFieldError(join(path, key), 'expected an SQL identifier: lower-case letters, digits and _');
  return v;
}

/** `schema.table` or `table` (schema `public`); the connector runtime's own schema is refused. */
export function tableName(o: Fields, path: string, key: string): { schema: string; table: string } {
  const v = o[key];
  const parts = typeof v === 'string' ? v.split('.') : [];
  const [schema, table] = parts.length === 1 ? ['public', parts[0]] : parts;
  if (parts.length < 1 || parts.length > 2 || !IDENTIFIER.test(schema ?? '') || !IDENTIFIER.test(table ?? ''))
    throw new ConfigFieldError(join(path, key), 'expected a table name: `table` or `schema.table`, SQL identifiers');
  if (schema === 'connectors' || schema === 'pg_catalog' || schema === 'information_schema')
    throw new ConfigFieldError(join(path, key), `schema ${schema} is not a job's to write`);
  return { schema, table };
}

export const quoted = (name: string) => `"${name}"`;
export const qualified = (t: { schema: string; table: string }) => `${quoted(t.schema)}.${quoted(t.table)}`;

/** Where a job's Postgres is: checked against the sink address rules when the job opens it. */
export interface PostgresTarget {
  host: string;
  port: number;
  database: string;
  user: string;
  /** Sealed at rest. */
  password: string;
}

export function postgresTarget(value: unknown, path: string): PostgresTarget {
  const o = object(value, path);
  return {
    host: text(o, path, 'host'),
    port: integerIn(o, path, 'port', 1, 65535, 5432),
    database: text(o, path, 'database'),
    user: text(o, path, 'user'),
    password: typeof o.password === 'string' ? o.password : text(o, path, 'password'),
  };
}

/** A pool to a job's database, at the address the target guard checked (never the name again: no rebinding). */
export function poolFor(target: PostgresTarget, address: string, max: number, limits: PoolLimits = POOL_LIMITS): Pool {
  const pool = new Pool({
    host: address,
    port: target.port,
    database: target.database,
    user: target.user,
    password: target.password,
    max,
    connectionTimeoutMillis: limits.connectMs,
    statement_timeout: limits.statementMs,
    query_timeout: limits.queryMs,
    keepAlive: true,
  });
  // An idle connection the server dropped: the next query fails and the round is retried; nothing to do here.
  pool.on('error', () => undefined);
  return pool;
}

/** How long a job's database may take: to connect, to run a statement (on the server), to answer (here). */
export interface PoolLimits {
  connectMs: number;
  statementMs: number;
  queryMs: number;
}

/**
 * A job's database that does not answer fails the round (which the job retries with backoff, its last error saying
 * so) instead of holding the run, which heartbeats while it waits: a connect in 10 s, a statement in 60 s on the
 * server, an answer in 90 s here (a server that stopped answering altogether). A statement of the jobs (a batch of at
 * most 1,000 rows, an outbox poll through its index, a prune of at most 10,000 ledger rows) takes milliseconds.
 */
export const POOL_LIMITS: PoolLimits = { connectMs: 10_000, statementMs: 60_000, queryMs: 90_000 };

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/**
 * Which dead letters of one subscription a browse, a replay or a purge is about. Every field given narrows the
 * selection; none given selects every dead letter not replayed yet. Plain values only (strings and numbers), so
 * a filter can travel in a replay workflow's input: it names letters, it never carries one.
 */
export interface DeadLetterFilter {
  /** The event's `type`, exactly. */
  type?: string;
  /** The event's `source`, exactly. */
  source?: string;
  /** Dead-lettered at or after this instant (ISO 8601). */
  from?: string;
  /** Dead-lettered before this instant (ISO 8601). */
  to?: string;
  /** Part of the last error, case-insensitive (`timeout`, `ECONNREFUSED`). */
  lastError?: string;
  /** The last attempt was answered with this HTTP status (the last error reads `HTTP <status>`). */
  httpStatus?: number;
  /** `dead` (default): not replayed; `replayed`: delivered by a replay; `all`. */
  state?: DeadLetterState;
}

export const DEAD_LETTER_STATES = ['dead', 'replayed', 'all'] as const;
export type DeadLetterState = (typeof DEAD_LETTER_STATES)[number];

/** `%`, `_` and `\` of a LIKE pattern taken literally. */
const likeLiteral = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * The filter as SQL conditions on the `dead_letters` row `d`, each preceded by AND; its values are appended to
 * `params` and referenced by position, never spliced into the text.
 */
export function deadLetterFilterSql(filter: DeadLetterFilter, params: unknown[]): string {
  const at = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  let sql = '';
  if (filter.type !== undefined) sql += ` AND d.attributes->>'type' = ${at(filter.type)}`;
  if (filter.source !== undefined) sql += ` AND d.attributes->>'source' = ${at(filter.source)}`;
  if (filter.from !== undefined) sql += ` AND d.created_at >= ${at(filter.from)}::timestamptz`;
  if (filter.to !== undefined) sql += ` AND d.created_at < ${at(filter.to)}::timestamptz`;
  if (filter.lastError !== undefined) sql += ` AND d.last_error ILIKE '%' || ${at(likeLiteral(filter.lastError))} || '%'`;
  if (filter.httpStatus !== undefined) sql += ` AND d.last_error = 'HTTP ' || ${at(String(filter.httpStatus))}`;
  const state = filter.state ?? 'dead';
  if (state === 'dead') sql += ' AND d.replayed_at IS NULL';
  if (state === 'replayed') sql += ' AND d.replayed_at IS NOT NULL';
  return sql;
}

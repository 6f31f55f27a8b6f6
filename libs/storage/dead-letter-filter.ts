import { DEAD_LETTER_STATES, type DeadLetterFilter, type DeadLetterState } from '../../contracts';

// Declared with the Temporal contracts (a replay workflow's input carries a filter); exported here for the stores.
export { DEAD_LETTER_STATES };
export type { DeadLetterFilter, DeadLetterState };

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
  if (filter.lastError !== undefined)
    sql += ` AND d.last_error ILIKE '%' || ${at(likeLiteral(filter.lastError))} || '%'`;
  if (filter.httpStatus !== undefined) sql += ` AND d.last_error = 'HTTP ' || ${at(String(filter.httpStatus))}`;
  const state = filter.state ?? 'dead';
  if (state === 'dead') sql += ' AND d.replayed_at IS NULL';
  if (state === 'replayed') sql += ' AND d.replayed_at IS NOT NULL';
  return sql;
}

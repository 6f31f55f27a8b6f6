import type { z } from 'zod';
import { ErrorCode, EventMeshError } from '@libs/errors';

/**
 * A value checked against its schema: the value, or 400 INVALID_REQUEST naming the first bad field (and, for one item
 * of a list, the item: `item` is its prefix, for example `answer 2`, and `index` its position).
 */
function parseInput<T>(schema: z.ZodType<T>, value: unknown, whole: string, item?: { name: string; index: number }): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.join('.');
    const message = `${field || whole}: ${issue.message}`;
    throw new EventMeshError(
      ErrorCode.InvalidRequest,
      item ? `${item.name} ${item.index}: ${message}` : message,
      item ? { field, index: item.index } : { field },
    );
  }
  return parsed.data;
}

/** One item of a list body (an answer among the answers `POST /subscriptions/{id}/acks` takes). */
export function parseItem<T>(schema: z.ZodType<T>, value: unknown, name: string, index: number): T {
  return parseInput(schema, value, name, { name, index });
}

/** A request body checked against its schema (an absent body read as `{}`). */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  return parseInput(schema, body ?? {}, 'body');
}

/**
 * Query parameters checked against the schema the route's entry of the API document shows (its `query`), so the
 * document states the limits the route enforces.
 */
export function parseQuery<T>(schema: z.ZodType<T>, query: unknown): T {
  return parseInput(schema, query ?? {}, 'query');
}

/** A body the route cannot do without (a `PUT` that replaces): 400 when the request sent none. */
export function requiredBody(body: unknown): unknown {
  if (body === undefined || body === null)
    throw new EventMeshError(ErrorCode.InvalidRequest, 'body: required (a JSON object)', { field: 'body' });
  return body;
}

import { z } from 'zod';
import { ErrorCode, EventMeshError, pgText, queryInt } from '@libs/errors';
import { DEAD_LETTER_STATES, DeadLetterFilter, ReplaySelection } from '@libs/storage';

/** Page sizes of a browse: `limit` 1 to 1000, 100 when absent. */
export const BROWSE_DEFAULT_LIMIT = 100;
export const BROWSE_MAX_LIMIT = 1000;
/** Replay rates a request may ask for, in events per second. */
export const REPLAY_MAX_RATE = 1000;
/** Most letter ids one replay request names (more: replay by filter). */
export const REPLAY_MAX_IDS = 1000;

const LETTER_ID = /^[1-9]\d{0,18}$/;
const instant = z.iso
  .datetime({ offset: true, error: 'expected an ISO 8601 instant, e.g. 2026-12-01T13:00:00Z' })
  .refine((s) => !Number.isNaN(Date.parse(s)), 'expected an ISO 8601 instant, e.g. 2026-12-01T13:00:00Z');
// Postgres text holds no NUL: a filter naming one is refused (found by the fuzz step: a replay's `type` with one was a 500).
const text = pgText().min(1).max(1024);

/** The filter fields, as query parameters (all text) or as a replay body's `filter` (httpStatus a number). */
const filterFields = {
  type: text.optional().describe('the event type'),
  source: text.optional().describe('the event source'),
  from: instant.optional().describe('dead-lettered at or after'),
  to: instant.optional().describe('dead-lettered before, after `from`'),
  lastError: text.optional().describe('a substring of the last error'),
};
const httpStatus = z.number().int().min(100).max(599);

const checkRange = (f: { from?: string; to?: string }, ctx: z.RefinementCtx) => {
  if (f.from !== undefined && f.to !== undefined && Date.parse(f.from) >= Date.parse(f.to)) {
    ctx.addIssue({ code: 'custom', path: ['to'], message: '`to` must be after `from`' });
  }
};

const queryFilter = z.object({
  ...filterFields,
  httpStatus: queryInt(100, 599).describe("the sink's last HTTP status"),
  state: z.enum(DEAD_LETTER_STATES).optional().describe('dead (not replayed, the default), replayed, or all'),
});

/** The browse's query parameters (the API document shows them). */
export const browseQuerySchema = queryFilter
  .extend({
    limit: queryInt(1, BROWSE_MAX_LIMIT).describe(`the page size (${BROWSE_DEFAULT_LIMIT} when absent)`),
    cursor: z.string().min(1).max(200).optional().describe('the `next` of the previous page'),
  })
  .strict()
  .superRefine(checkRange);

/** The purge's query parameters (the API document shows them). */
export const purgeQuerySchema = queryFilter
  .extend({ confirm: z.string().describe("the subscription's id, repeated: a purge is never an accident") })
  .strict()
  .superRefine(checkRange);

/** A replay's body (the API document shows it). */
export const replayBodySchema = z
  .object({
    ids: z.array(z.string().regex(LETTER_ID, 'expected a dead letter id')).min(1).max(REPLAY_MAX_IDS).optional(),
    filter: z
      .object({ ...filterFields, httpStatus: httpStatus.optional() })
      .strict()
      .superRefine(checkRange)
      .optional(),
    ratePerSecond: z.number().int().min(1).max(REPLAY_MAX_RATE).optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    if ((b.ids === undefined) === (b.filter === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['ids'],
        message: 'name the letters to replay: either `ids` or `filter` (`{}` for all), not both',
      });
    }
  })
  // The refinement above, as the API document's JSON Schema states it.
  .meta({ oneOf: [{ required: ['ids'] }, { required: ['filter'] }] });

/** A schema's value, or 400 INVALID_REQUEST naming the first bad field. */
function parse<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue.code === 'unrecognized_keys' ? issue.keys[0] : issue.path.join('.');
  const message =
    issue.code === 'unrecognized_keys'
      ? `unknown parameter; the filters are type, source, from, to, lastError, httpStatus, state`
      : issue.message;
  throw new EventMeshError(ErrorCode.InvalidRequest, `${field || 'request'}: ${message}`, { field });
}

const filterOf = (q: DeadLetterFilter): DeadLetterFilter => {
  const filter: DeadLetterFilter = {};
  for (const key of ['type', 'source', 'from', 'to', 'lastError', 'httpStatus', 'state'] as const) {
    if (q[key] !== undefined) (filter as Record<string, unknown>)[key] = q[key];
  }
  // Instants normalised, so the same moment always reads the same (and compares in Postgres as written).
  if (filter.from) filter.from = new Date(filter.from).toISOString();
  if (filter.to) filter.to = new Date(filter.to).toISOString();
  return filter;
};

/** The cursor of the page after letter `id`: opaque to clients. */
export const cursorAfter = (id: string) => Buffer.from(JSON.stringify({ after: id })).toString('base64url');

function afterIdOf(cursor: string): string {
  try {
    const decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { after?: unknown };
    if (typeof decoded.after === 'string' && LETTER_ID.test(decoded.after)) return decoded.after;
  } catch {
    // below
  }
  throw new EventMeshError(
    ErrorCode.InvalidRequest,
    'cursor: not a cursor this API gave out (use `next` of the previous page)',
    { field: 'cursor' },
  );
}

/** `GET .../dead-letters` query: the filter and the page. */
export function parseBrowseQuery(query: unknown): { filter: DeadLetterFilter; limit: number; afterId?: string } {
  const q = parse(browseQuerySchema, query);
  return {
    filter: filterOf(q),
    limit: q.limit ?? BROWSE_DEFAULT_LIMIT,
    afterId: q.cursor === undefined ? undefined : afterIdOf(q.cursor),
  };
}

/**
 * `DELETE .../dead-letters` query: the filter, and `confirm`, which must repeat the subscription id (else 400
 * CONFIRMATION_REQUIRED): a purge is never the accident of a bare DELETE.
 */
export function parsePurgeQuery(query: unknown, subscriptionId: string): DeadLetterFilter {
  if ((query as { confirm?: unknown } | undefined)?.confirm !== subscriptionId) {
    throw new EventMeshError(
      ErrorCode.ConfirmationRequired,
      'confirm: a purge deletes dead letters for good; repeat the subscription id as `?confirm=<subscription id>`',
      { field: 'confirm' },
    );
  }
  return filterOf(parse(purgeQuerySchema, query));
}

/** `POST .../dead-letters/replays` body: which letters, and the rate (the configured default when absent). */
export function parseReplayRequest(body: unknown): { selection: ReplaySelection; ratePerSecond?: number } {
  const b = parse(replayBodySchema, body);
  const selection: ReplaySelection = b.ids ? { ids: [...new Set(b.ids)] } : { filter: filterOf(b.filter!) };
  return { selection, ratePerSecond: b.ratePerSecond };
}

/** A letter id from a path: digits, else 404 like a missing one. */
export function isLetterId(id: string): boolean {
  return LETTER_ID.test(id);
}

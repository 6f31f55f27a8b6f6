import { BROWSE_DEFAULT_LIMIT, BROWSE_MAX_LIMIT } from '@libs/dead-letters';
import { z } from 'zod';
import { ErrorCode, EventMeshError, pgText, queryInt } from '@libs/errors';

import { PUSH_LETTER_ID, type PushDeadLetter, type PushDeadLetterFilter } from '@libs/storage';

export {
  isPushLetterId,
  PUSH_LETTER_RESOLUTIONS,
  PushDeadLetterStore,
  type GivenUpPush,
  type PushDeadLetter,
  type PushDeadLetterFilter,
  type PushLetterResolution,
} from '@libs/storage';

export type PushDeadLetterView = Omit<PushDeadLetter, 'tenant' | 'deadLetteredAt' | 'resolvedAt'> & {
  deadLetteredAt: string;
  resolvedAt: string | null;
};

export const pushLetterViewOf = ({
  tenant: _tenant,
  deadLetteredAt,
  resolvedAt,
  ...rest
}: PushDeadLetter): PushDeadLetterView => ({
  ...rest,
  deadLetteredAt: deadLetteredAt.toISOString(),
  resolvedAt: resolvedAt?.toISOString() ?? null,
});

const STATES = ['dead', 'resolved', 'all'] as const;
/** Postgres text holds no NUL: a filter naming one is refused rather than sent. */
const filterText = pgText();

/** The browse's query parameters (the API document shows them). */
export const pushLetterQuerySchema = z
  .object({
    state: z.enum(STATES).optional().describe('dead (the default), resolved, or all'),
    agent: filterText.optional().describe("the task's agent"),
    taskId: filterText.optional().describe('the task'),
    limit: queryInt(1, BROWSE_MAX_LIMIT).describe(`the page size (${BROWSE_DEFAULT_LIMIT} when absent)`),
    cursor: z.string().regex(PUSH_LETTER_ID).optional().describe('the `next` of the previous page'),
  })
  .strict();

/** The browse's query (`state`, `agent`, `taskId`, `limit`, `cursor`), validated: a 400 naming the parameter. */
export function parsePushLetterQuery(query: unknown): { filter: PushDeadLetterFilter; limit: number; after?: string } {
  const parsed = pushLetterQuerySchema.safeParse(query ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.code === 'unrecognized_keys' ? issue.keys[0] : issue.path.join('.');
    const message =
      issue.code === 'unrecognized_keys'
        ? `unknown parameter; the parameters are ${Object.keys(pushLetterQuerySchema.shape).join(', ')}`
        : issue.message;
    throw new EventMeshError(ErrorCode.InvalidRequest, `${field}: ${message}`, { field });
  }
  const q = parsed.data;
  return {
    filter: { state: q.state ?? 'dead', agent: q.agent || undefined, taskId: q.taskId || undefined },
    limit: q.limit ?? BROWSE_DEFAULT_LIMIT,
    after: q.cursor,
  };
}

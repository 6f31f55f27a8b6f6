import type { z } from 'zod';
import { ErrorCode, EventMeshError } from '../../../libs/errors';

/** A request body checked against its schema: the value, or 400 INVALID_REQUEST naming the first bad field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new EventMeshError(ErrorCode.InvalidRequest, `${issue.path.join('.') || 'body'}: ${issue.message}`, { field: issue.path.join('.') });
  }
  return parsed.data;
}

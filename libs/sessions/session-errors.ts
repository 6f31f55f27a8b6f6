import { encodeSessionFrame } from '@libs/frame';
import { ErrorCode, EventMeshError, HTTP_STATUS_BY_CODE } from '@libs/errors';

/**
 * What an error frame ends: the current `call` (the agent's handler failed, the session is busy: the session stays
 * open), the whole `session` (its agent replica went away, flow control was broken: both ends forget it), or an
 * `open` (or a serve) that was refused: nothing was opened, and a session of the same id, if any, is untouched.
 */
export type ErrorScope = 'call' | 'session' | 'open';

/**
 * An error frame for session `id`: `{ code, status, message, scope }` and the error's details (a refusal's
 * `retryAfterSeconds`), in the runtime's codes and HTTP statuses, so the SDK raises the typed error it raises for
 * the same answer over HTTP.
 */
export function errorFrame(id: string, call: number, e: unknown, scope: ErrorScope): Buffer {
  return encodeSessionFrame({ kind: 'error', id, call, attributes: errorAttributes(e, scope) });
}

export function errorAttributes(e: unknown, scope: ErrorScope): Record<string, string | number | boolean> {
  const error =
    e instanceof EventMeshError ? e : new EventMeshError(ErrorCode.Internal, 'internal error', {}, false, { cause: e });
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(error.details))
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out[k] = v;
  const retryAfter = (error as { headers?: Record<string, string> }).headers?.['retry-after'];
  if (retryAfter !== undefined) out.retryAfterSeconds = Number(retryAfter);
  return {
    ...out,
    code: error.code,
    status: HTTP_STATUS_BY_CODE[error.code],
    message: error.message.slice(0, 1000),
    scope,
  };
}

/** The replica a session was bound to, or the instance holding it, went away. */
export const agentGone = (why: string) => new EventMeshError(ErrorCode.AgentGone, why);

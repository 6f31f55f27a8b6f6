import {
  ConflictError,
  ConnectionError,
  errorOf,
  EventMeshError,
  NotFoundError,
  PayloadTooLargeError,
} from '../errors';
import type { Attributes } from './frame';

/** No replica of the agent serves in your tenant (another tenant's agent of that name is not yours: the same answer). */
export class AgentNotFoundError extends NotFoundError {
  override readonly name = 'AgentNotFoundError';
}

/** The agent replica the session was bound to went away (or the instance holding it): the session is over. */
export class AgentGoneError extends EventMeshError {
  override readonly name = 'AgentGoneError';
}

/** The agent's handler failed the call (`message` is the agent's); the session stays open for another call. */
export class AgentCallError extends EventMeshError {
  override readonly name = 'AgentCallError';
}

/** A call on a session whose previous call has not ended (one call at a time per session). */
export class SessionBusyError extends ConflictError {
  override readonly name = 'SessionBusyError';
}

/** A writer broke flow control (an agent sent past its credit): the session is over. */
export class FlowControlError extends EventMeshError {
  override readonly name = 'FlowControlError';
}

/** The call was cancelled (by `cancel()`, its abort signal, or the caller going away, as the agent sees it). */
export class SessionCancelledError extends EventMeshError {
  override readonly name = 'SessionCancelledError';
}

/** The session was closed (by you), or the connection carrying it was lost: nothing more comes on it. */
export class SessionClosedError extends ConnectionError {
  override readonly name = 'SessionClosedError';
}

/** A chunk (or a publication) above the session's largest chunk; nothing was sent. */
export class ChunkTooLargeError extends PayloadTooLargeError {
  override readonly name = 'ChunkTooLargeError';
}

/** A session subscriber that fell further behind than its window was dropped by the runtime. */
export class SlowSubscriberError extends EventMeshError {
  override readonly name = 'SlowSubscriberError';
}

/** A named session ended (idle for its configured time, or its home went away). */
export class SessionEndedError extends EventMeshError {
  override readonly name = 'SessionEndedError';
}

const BY_CODE: Record<
  string,
  new (code: string, message: string, status?: number, body?: Record<string, unknown>) => EventMeshError
> = {
  SESSION_AGENT_NOT_FOUND: AgentNotFoundError,
  AGENT_GONE: AgentGoneError,
  AGENT_ERROR: AgentCallError,
  SESSION_BUSY: SessionBusyError,
  FLOW_CONTROL_VIOLATION: FlowControlError,
  SLOW_SUBSCRIBER: SlowSubscriberError,
  SESSION_ENDED: SessionEndedError,
};

/** The typed error of an error frame: by its code where streaming has its own class, else as the same HTTP answer. */
export function sessionErrorOf(attributes: Attributes): EventMeshError {
  const code = String(attributes.code ?? 'INTERNAL');
  const status = Number(attributes.status ?? 500);
  const body: Record<string, unknown> = { ...attributes };
  const kind = BY_CODE[code];
  return kind ? new kind(code, String(attributes.message ?? code), status, body) : errorOf(status, body);
}

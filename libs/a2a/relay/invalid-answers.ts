import { InvalidAgentResponseError } from '@a2a-js/sdk/errors';
import { AgentAnswerTooLarge } from './request-fetch';
import type { StoredTask } from '../tasks/task-store';

/**
 * An agent's answer that is not A2A: how the mesh tells one from an agent not reached, and how a task it failed
 * says so. Such a task fails at once (sent again, the answer would come again, and the agent take the turn again);
 * a blocking send of it is answered -32006 (mesh-task-handler.ts). The change that fails it is
 * agent-task-follower.ts `invalidAnswer`.
 */

/** The metadata of the status message of a task the mesh failed on an invalid answer. */
export const FAILURE_REASON_KEY = 'urn:eventmesh:a2a:failure';
export const INVALID_AGENT_RESPONSE = 'INVALID_AGENT_RESPONSE';
export const INVALID_ANSWER_METADATA: Readonly<Record<string, string>> = {
  [FAILURE_REASON_KEY]: INVALID_AGENT_RESPONSE,
};

export function failedOnInvalidAnswer(task: Pick<StoredTask, 'state' | 'statusMessage'>): boolean {
  const metadata = task.statusMessage?.metadata as Record<string, unknown> | undefined;
  return task.state === 'failed' && metadata?.[FAILURE_REASON_KEY] === INVALID_AGENT_RESPONSE;
}

/**
 * Whether a call's failure is an answer of the agent that is not A2A (a body that is not JSON, not JSON-RPC 2.0,
 * another request's id, a result with neither task nor message, an SSE event that does not parse), rather than an
 * agent not reached: the SDK's client throws InvalidAgentResponseError for some of these and plain errors (their
 * messages below) for the others.
 */
export function isInvalidAnswer(e: unknown): boolean {
  if (e instanceof InvalidAgentResponseError || isAnswerTooLarge(e)) return true;
  const message = e instanceof Error ? e.message : '';
  // A body that is not JSON; but an empty one (a proxy's, an agent stopping mid-answer) is tried again.
  if (e instanceof SyntaxError) return !/end of JSON input/.test(message);
  return INVALID_ANSWER_MESSAGES.test(message);
}

/** The messages of the SDK client's errors (1.3) for an answer that is not A2A, JSON-RPC and HTTP+JSON, plain and SSE. */
const INVALID_ANSWER_MESSAGES =
  /^(Invalid response|Invalid JSON-RPC response|JSON-RPC response ID mismatch|Invalid SendMessageResponse|Failed to parse SSE event data|SSE event JSON-RPC response is missing 'result' field|Attempted to process empty SSE event data)/;

/**
 * Whether a call's failure is an answer larger than the mesh reads: the JSON answer or stream event past
 * EVENTMESH_AGENTS_MAX_ANSWER_BYTES (request-fetch.ts), or a stream event past the SDK client's own limit of stream
 * events (4 MiB in 1.3, said only in its message). Sent again, the agent would answer the same: the task fails at
 * once, saying why.
 */
export function isAnswerTooLarge(e: unknown): boolean {
  return e instanceof AgentAnswerTooLarge || (e instanceof Error && SDK_SIZE_LIMIT.test(e.message));
}

/** The SDK client's (1.3) refusal of an SSE line or event over its size limit. */
const SDK_SIZE_LIMIT = /^SSE (line|event data) exceeded the maximum allowed size of (\d+) bytes/;

/** Why the answer was not read, for the failed task's status message. */
export function tooLargeReason(e: unknown): string {
  if (e instanceof AgentAnswerTooLarge) return e.message;
  const limit = e instanceof Error ? SDK_SIZE_LIMIT.exec(e.message)?.[2] : undefined;
  return `the agent's stream event is larger than the A2A client reads (${limit ?? '?'} bytes); the read was aborted`;
}

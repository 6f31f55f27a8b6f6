import { InvalidAgentResponseError } from '@a2a-js/sdk/errors';
import type { StoredTask } from './task-store';

/**
 * An agent's answer that is not A2A: how the mesh tells one from an agent not reached, and how a task it failed
 * says so. Such a task fails at once (sent again, the answer would come again, and the agent take the turn again);
 * a blocking send of it is answered -32006 (mesh-task-handler.ts). The change that fails it is
 * agent-task-follower.ts `invalidAnswer`.
 */

/** The metadata of the status message of a task the mesh failed on an invalid answer. */
export const FAILURE_REASON_KEY = 'urn:eventmesh:a2a:failure';
export const INVALID_AGENT_RESPONSE = 'INVALID_AGENT_RESPONSE';
export const INVALID_ANSWER_METADATA: Readonly<Record<string, string>> = { [FAILURE_REASON_KEY]: INVALID_AGENT_RESPONSE };

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
  if (e instanceof InvalidAgentResponseError) return true;
  const message = e instanceof Error ? e.message : '';
  // A body that is not JSON; but an empty one (a proxy's, an agent stopping mid-answer) is tried again.
  if (e instanceof SyntaxError) return !/end of JSON input/.test(message);
  return INVALID_ANSWER_MESSAGES.test(message);
}

/** The messages of the SDK client's errors (1.3) for an answer that is not A2A, JSON-RPC and HTTP+JSON, plain and SSE. */
const INVALID_ANSWER_MESSAGES =
  /^(Invalid response|Invalid JSON-RPC response|JSON-RPC response ID mismatch|Invalid SendMessageResponse|Failed to parse SSE event data|SSE event JSON-RPC response is missing 'result' field|Attempted to process empty SSE event data)/;

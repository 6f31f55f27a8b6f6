import { TaskState } from '@a2a-js/sdk';

/** A task's state as stored (`a2a_tasks.state`): the A2A specification's names. */
export type A2AState =
  'submitted' | 'working' | 'input-required' | 'auth-required' | 'completed' | 'failed' | 'canceled' | 'rejected';

/** The states a task never leaves (A2A specification, TaskState). */
export const TERMINAL: ReadonlySet<A2AState> = new Set<A2AState>(['completed', 'failed', 'canceled', 'rejected']);

/** The interrupted states: the task waits for its client (a message with input, or credentials). */
export const AWAITING_CLIENT: ReadonlySet<A2AState> = new Set<A2AState>(['input-required', 'auth-required']);

/** Terminal or interrupted: the agent has nothing more to do until the client sends again. */
export const SETTLED: ReadonlySet<A2AState> = new Set<A2AState>([...TERMINAL, ...AWAITING_CLIENT]);

const BY_WIRE: ReadonlyMap<TaskState, A2AState> = new Map<TaskState, A2AState>([
  [TaskState.TASK_STATE_SUBMITTED, 'submitted'],
  [TaskState.TASK_STATE_WORKING, 'working'],
  [TaskState.TASK_STATE_INPUT_REQUIRED, 'input-required'],
  [TaskState.TASK_STATE_AUTH_REQUIRED, 'auth-required'],
  [TaskState.TASK_STATE_COMPLETED, 'completed'],
  [TaskState.TASK_STATE_FAILED, 'failed'],
  [TaskState.TASK_STATE_CANCELED, 'canceled'],
  [TaskState.TASK_STATE_REJECTED, 'rejected'],
]);
const TO_WIRE = new Map<A2AState, TaskState>([...BY_WIRE].map(([wire, state]) => [state, wire]));

/** The stored state of a wire state; undefined for UNSPECIFIED and unknown values (an invalid agent response). */
export function stateOf(wire: TaskState | undefined): A2AState | undefined {
  return wire === undefined ? undefined : BY_WIRE.get(wire);
}

export function wireStateOf(state: A2AState): TaskState {
  return TO_WIRE.get(state) ?? TaskState.TASK_STATE_UNSPECIFIED;
}

export function isA2AState(value: string): value is A2AState {
  return TO_WIRE.has(value as A2AState);
}

/**
 * Whether a task may move from `from` to `to`: a terminal state is final; `submitted` is only where a task starts
 * (it may stay there, while the agent has not begun); any other state may follow a non-terminal one (including
 * itself: a status update with a new message).
 */
export function isLegalTransition(from: A2AState, to: A2AState): boolean {
  return !TERMINAL.has(from) && (to !== 'submitted' || from === 'submitted');
}

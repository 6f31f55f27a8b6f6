import { TaskState } from '@a2a-js/sdk';
import { A2AState, isLegalTransition, stateOf, TERMINAL, wireStateOf } from './task-states';

const ALL: A2AState[] = [
  'submitted',
  'working',
  'input-required',
  'auth-required',
  'completed',
  'failed',
  'canceled',
  'rejected',
];

describe('A2A task states', () => {
  it('round-trips every state through the wire enum; UNSPECIFIED and unknown values have none', () => {
    for (const state of ALL) expect(stateOf(wireStateOf(state))).toBe(state);
    expect(stateOf(TaskState.TASK_STATE_UNSPECIFIED)).toBeUndefined();
    expect(stateOf(TaskState.UNRECOGNIZED)).toBeUndefined();
  });

  it('never leaves a terminal state, never returns to submitted, and lets a live task move anywhere else', () => {
    for (const from of ALL)
      for (const to of ALL)
        expect([from, to, isLegalTransition(from, to)]).toEqual([
          from,
          to,
          !TERMINAL.has(from) && (to !== 'submitted' || from === 'submitted'),
        ]);
    expect(isLegalTransition('working', 'submitted')).toBe(false);
    expect(isLegalTransition('submitted', 'submitted')).toBe(true);
    expect([...TERMINAL].sort()).toEqual(['canceled', 'completed', 'failed', 'rejected']);
  });
});

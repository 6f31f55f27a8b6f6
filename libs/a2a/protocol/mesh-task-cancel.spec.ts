import { TaskState } from '@a2a-js/sdk';
import { TaskNotCancelableError } from '@a2a-js/sdk/errors';
import { ServerCallContext } from '@a2a-js/sdk/server';
import type { CancelOutcome } from '../../../contracts';
import { MeshTaskHandler, MeshTaskScope } from './mesh-task-handler';
import type { StoredTask } from '../tasks/task-store';

/**
 * CancelTask's answer from what the task's workflow answered (stand-in workflows and task store): a task canceled
 * since the call read it (its delivery, stopped by this cancel, recorded it canceled before the cancel step ran) is
 * answered with the canceled task, not refused.
 */
describe('MeshTaskHandler cancel', () => {
  const stored = (state: StoredTask['state']): StoredTask => ({
    id: 't1',
    tenant: 'acme',
    agent: 'echo',
    agentTaskId: null,
    deliveredTurn: 1,
    agentResends: 0,
    requestRecord: null,
    contextId: 'c1',
    state,
    statusMessage: null,
    history: [],
    artifacts: [],
    metadata: {},
    version: 1,
    eventSeq: 1,
    createdAt: new Date(0),
    updatedAt: new Date(0),
  });
  const handlerWith = (reads: StoredTask['state'][], running: CancelOutcome | 'not-running', ended: CancelOutcome) => {
    const states = [...reads];
    const scope = {
      tenant: 'acme',
      agent: { name: 'echo' },
      tasks: { get: async () => stored(states.length > 1 ? states.shift()! : states[0]) },
      workflows: { cancel: async () => running, cancelEnded: async () => ended },
    } as unknown as MeshTaskScope;
    return new MeshTaskHandler(scope);
  };
  const cancel = (handler: MeshTaskHandler) =>
    handler.cancelTask(
      { tenant: '', id: 't1', metadata: undefined },
      new ServerCallContext({ requestedVersion: '1.0', user: { isAuthenticated: false, userName: '' } }),
    );

  it('answers the canceled task when the task was canceled after this call read it', async () => {
    const running = handlerWith(
      ['working', 'canceled'],
      { outcome: 'not-cancelable', state: 'canceled' },
      { outcome: 'missing' },
    );
    expect((await cancel(running)).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const ended = handlerWith(['input-required', 'canceled'], 'not-running', {
      outcome: 'not-cancelable',
      state: 'canceled',
    });
    expect((await cancel(ended)).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it('still refuses a task that settled otherwise meanwhile, and one that was canceled before this call read it', async () => {
    await expect(
      cancel(handlerWith(['working', 'completed'], 'not-running', { outcome: 'not-cancelable', state: 'completed' })),
    ).rejects.toBeInstanceOf(TaskNotCancelableError);
    await expect(
      cancel(handlerWith(['canceled'], { outcome: 'canceled' }, { outcome: 'canceled' })),
    ).rejects.toBeInstanceOf(TaskNotCancelableError);
  });
});

import { Role } from '@a2a-js/sdk';
import type { Client } from '@temporalio/client';
import { ServerCallContext } from '@a2a-js/sdk/server';
import type { StoredAgent } from '../agents/agent-store';
import { FirstAttempts } from '../relay/first-attempts';
import { MeshTaskHandler, MeshTaskScope } from './mesh-task-handler';
import { RequestHandoff } from '../relay/request-handoff';
import { TaskSettlements } from '../tasks/task-settlements';
import { TaskWorkflows } from '../temporal/task-workflows';
import type { A2AState } from '../tasks/task-states';
import type { NewTask, StoredTask } from '../tasks/task-store';

/**
 * How a new task is taken (stand-ins for Kafka, Postgres and Temporal): the workflow starts while the request record
 * and then the row naming it are written; a task not taken leaves no workflow running and no row `submitted`; the
 * first attempt is begun only for a workflow started here with its row written, and withdrawn otherwise.
 */
describe('MeshTaskHandler take', () => {
  const storedOf = (task: NewTask): StoredTask => ({
    ...task,
    agentTaskId: null,
    deliveredTurn: 0,
    agentResends: 0,
    requestRecord: task.requestRecord ?? null,
    state: 'submitted',
    statusMessage: null,
    artifacts: [],
    version: 0,
    eventSeq: 1,
    createdAt: new Date(0),
    updatedAt: new Date(0),
  });
  const setup = (
    fail: { publish?: boolean; create?: boolean; start?: boolean } = {},
    eager = true,
    style: StoredAgent['style'] = 'url',
  ) => {
    const delivered: string[] = [];
    const firstAttempts = new FirstAttempts(
      { deliver: async (ids) => (delivered.push(ids.taskId), 'completed' as A2AState) },
      new AbortController().signal,
    );
    const requests = new RequestHandoff();
    const order: string[] = [];
    const tasks = {
      create: jest.fn(async (task: NewTask) => {
        order.push('row');
        if (fail.create) throw new Error('Postgres is down');
        return storedOf(task);
      }),
      transition: jest.fn(async (task: StoredTask, change: { state: A2AState }) => ({
        changed: true,
        task: { ...task, state: change.state },
      })),
    };
    // The real gateway side of the workflows (its first attempts and handoff on this process's worker), with the
    // Temporal calls stood in for.
    const real = new TaskWorkflows({} as Client, {
      timeoutMs: 60_000,
      callTimeoutMs: 1000,
      worker: {
        client: {} as Client,
        settlements: new TaskSettlements(),
        running: () => true,
        firstAttempts,
        requests,
      },
    });
    const workflows = {
      start: jest.spyOn(real, 'start').mockImplementation(async (..._args: unknown[]) => {
        order.push('start');
        if (fail.start) throw new Error('Temporal is down');
        return eager;
      }),
      abandon: jest.spyOn(real, 'abandon').mockImplementation(async (..._args: unknown[]) => undefined),
    };
    const publish = jest.fn(async () => {
      order.push('record');
      if (fail.publish) throw new Error('Kafka is down');
      return { partition: 0, offset: 41 };
    });
    const scope = {
      tenant: 'acme',
      agent: { tenant: 'acme', name: 'echo', style, card: { defaultInputModes: ['text/plain'], skills: [] } },
      tasks,
      workflows: real,
      publish,
    } as unknown as MeshTaskScope;
    return {
      handler: new MeshTaskHandler(scope),
      tasks,
      workflows,
      publish,
      firstAttempts,
      requests,
      delivered,
      order,
    };
  };
  const send = (handler: MeshTaskHandler) =>
    handler.sendMessage(
      {
        tenant: '',
        message: {
          messageId: 'm1',
          contextId: '',
          taskId: '',
          role: Role.ROLE_USER,
          parts: [
            { content: { $case: 'text', value: 'hi' }, metadata: undefined, filename: '', mediaType: 'text/plain' },
          ],
          metadata: undefined,
          extensions: [],
          referenceTaskIds: [],
        },
        configuration: {
          acceptedOutputModes: [],
          historyLength: undefined,
          returnImmediately: true,
          taskPushNotificationConfig: undefined,
        },
        metadata: undefined,
      },
      new ServerCallContext({ requestedVersion: '1.0', user: { isAuthenticated: false, userName: '' } }),
    );
  const settle = () => new Promise((resolve) => setImmediate(resolve));

  it('starts the workflow without a record position, writes the record then the row naming it, and begins the first attempt', async () => {
    const t = setup();
    const task = await send(t.handler);
    // The start did not wait for the writes; the row came after the record.
    expect(t.order).toEqual(['record', 'start', 'row']);
    expect(t.workflows.start.mock.calls[0][2]).toBeUndefined();
    expect(t.tasks.create.mock.calls[0][0].requestRecord).toEqual({
      topic: 'a2a.acme.echo.requests',
      partition: 0,
      offset: 41,
    });
    expect(t.requests.stats()).toMatchObject({ handed: 1, taken: 1, held: 0 });
    await settle();
    expect(t.delivered).toEqual(['id' in task ? task.id : '']);
    expect(t.firstAttempts.stats()).toMatchObject({ begun: 1, held: 1 });
  });

  it('begins no first attempt for a workflow that did not start here, and lets its local activity deliver', async () => {
    const t = setup({}, false);
    const task = await send(t.handler);
    const id = 'id' in task ? task.id : '';
    expect(t.firstAttempts.stats()).toMatchObject({ begun: 0, held: 0 });
    await expect(t.firstAttempts.run(id, 1, new AbortController().signal, async () => 'working')).resolves.toBe(
      'working',
    );
  });

  it("writes a mesh subscriber's row and record at once (its subscription delivers the record), and begins no attempt", async () => {
    const t = setup({}, true, 'subscriber');
    await send(t.handler);
    expect(t.tasks.create.mock.calls[0][0].requestRecord).toBeUndefined();
    expect(t.publish).toHaveBeenCalledTimes(1);
    expect(t.firstAttempts.stats()).toMatchObject({ begun: 0, held: 0 });
  });

  it("publishes a mesh subscriber's record only once its row is written, so an update the agent posts on receipt finds the task", async () => {
    const t = setup({}, true, 'subscriber');
    let written!: () => void;
    const rowWritten = new Promise<void>((resolve) => (written = resolve));
    t.tasks.create.mockImplementationOnce(async (task: NewTask) => {
      await rowWritten;
      t.order.push('row');
      return storedOf(task);
    });
    const sent = send(t.handler);
    await settle();
    expect(t.publish).not.toHaveBeenCalled();
    written();
    await sent;
    expect(t.order.filter((step) => step !== 'start')).toEqual(['row', 'record']);
  });

  it("fails a mesh subscriber's row when its record could not be written after it", async () => {
    const t = setup({ publish: true }, true, 'subscriber');
    await expect(send(t.handler)).rejects.toThrow('Kafka is down');
    expect(t.tasks.transition).toHaveBeenCalledTimes(1);
    expect(t.tasks.transition.mock.calls[0][1]).toMatchObject({ state: 'failed' });
    expect(t.workflows.abandon).toHaveBeenCalledTimes(1);
  });

  it('ends the workflow it started when the record could not be written, and writes no row', async () => {
    const t = setup({ publish: true });
    await expect(send(t.handler)).rejects.toThrow('Kafka is down');
    expect(t.tasks.create).not.toHaveBeenCalled();
    expect(t.workflows.abandon).toHaveBeenCalledTimes(1);
    expect(t.workflows.abandon.mock.calls[0]).toEqual([
      expect.any(String),
      'the mesh could not take the task: Kafka is down',
    ]);
    expect(t.firstAttempts.stats()).toMatchObject({ begun: 0, held: 0 });
  });

  it('ends the workflow it started when the row could not be written', async () => {
    const t = setup({ create: true });
    await expect(send(t.handler)).rejects.toThrow('Postgres is down');
    expect(t.workflows.abandon).toHaveBeenCalledTimes(1);
    expect(t.tasks.transition).not.toHaveBeenCalled();
    expect(t.firstAttempts.stats()).toMatchObject({ begun: 0, held: 0 });
  });

  it('fails the row it wrote when the workflow could not start (no workflow to end)', async () => {
    const t = setup({ start: true });
    await expect(send(t.handler)).rejects.toThrow('Temporal is down');
    expect(t.workflows.abandon).not.toHaveBeenCalled();
    expect(t.tasks.transition).toHaveBeenCalledTimes(1);
    expect(t.tasks.transition.mock.calls[0][1]).toMatchObject({ state: 'failed' });
    expect(t.firstAttempts.stats()).toMatchObject({ begun: 0, held: 0 });
    expect(t.delivered).toEqual([]);
  });
});

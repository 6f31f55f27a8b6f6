import { SendMessageRequest, StreamResponse, Task, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { UnsupportedOperationError } from '@a2a-js/sdk/errors';
import { taskToFrame } from '../protocol/a2a-frame.adaptor';
import type { AgentClients } from './agent-clients';
import type { A2AAgentStore } from '../agents/agent-store';
import { AgentUnreachable } from './agent-task-follower';
import { TaskRelay } from './task-relay';
import type { A2ATaskStore, StoredTask, TaskChange } from '../tasks/task-store';

const part = (text: string) => ({
  content: { $case: 'text' as const, value: text },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});
const message = (text: string) => ({
  messageId: `m-${text}`,
  contextId: 'c1',
  taskId: 'a1',
  role: 2,
  parts: [part(text)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const status = (state: TaskState, text?: string): StreamResponse => ({
  payload: {
    $case: 'statusUpdate',
    value: {
      taskId: 'a1',
      contextId: 'c1',
      status: { state, message: text === undefined ? undefined : message(text), timestamp: undefined },
      metadata: undefined,
    },
  },
});
const artifact = (text: string, append: boolean): StreamResponse => ({
  payload: {
    $case: 'artifactUpdate',
    value: {
      taskId: 'a1',
      contextId: 'c1',
      artifact: {
        artifactId: 'r',
        name: 'result',
        description: '',
        parts: [part(text)],
        metadata: undefined,
        extensions: [],
      },
      append,
      lastChunk: append,
      metadata: undefined,
    },
  },
});
const agentTask = (state: TaskState): Task => ({
  id: 'a1',
  contextId: 'c1',
  status: { state, message: undefined, timestamp: undefined },
  artifacts: [],
  history: [],
  metadata: undefined,
});
const taskEvent = (state: TaskState): StreamResponse => ({ payload: { $case: 'task', value: agentTask(state) } });

async function* events(list: StreamResponse[], thenThrow?: Error): AsyncGenerator<StreamResponse, void, undefined> {
  for (const e of list) yield e;
  if (thenThrow) throw thenThrow;
}

/** What a recorded change says, short: `state`, its status text, its artifacts' texts, and the turn it recorded as sent. */
const summary = (c: TaskChange) => {
  const text = (m: unknown) => ((m as { parts?: { text?: string }[] } | null)?.parts ?? []).map((p) => p.text).join('');
  return [
    c.state,
    text(c.statusMessage),
    (c.artifacts ?? []).map((a) => text(a)).join('|'),
    c.deliveredTurn ?? '',
  ].join(' / ');
};

/**
 * An agent whose card says it streams (`capabilities.streaming`) is sent the turn on its stream and followed on it
 * (SendStreamingMessage, then SubscribeToTask): each status and artifact it reports is recorded, in order; GetTask only
 * when the agent refuses a stream (stand-ins for Postgres and the agent's client).
 */
describe('TaskRelay with an agent that streams', () => {
  const ids = { taskId: 't1', tenant: 'acme', agent: 'echo' };
  const frame = taskToFrame(
    { taskId: 't1', contextId: 'c1', agent: 'echo' },
    SendMessageRequest.fromJSON({ message: { messageId: 'u1', role: 'ROLE_USER', parts: [{ text: 'go' }] } }),
    new Date(0),
  );

  const setup = (
    client: Partial<Record<keyof Client, jest.Mock>>,
    from: Partial<StoredTask> = {},
    streaming = true,
    onChange?: (task: StoredTask) => void,
  ) => {
    const changes: TaskChange[] = [];
    let version = 0;
    let latest: StoredTask | undefined;
    const tasks = {
      transition: jest.fn(async (read: StoredTask, change: TaskChange) => {
        changes.push(change);
        // As Postgres answers it: the status message's keys in the jsonb's order, not the change's.
        const statusMessage =
          change.statusMessage === undefined
            ? read.statusMessage
            : change.statusMessage && Object.fromEntries(Object.entries(change.statusMessage).reverse());
        latest = { ...read, ...change, statusMessage, version: ++version } as StoredTask;
        return { changed: true, task: latest };
      }),
    };
    const task = {
      id: 't1',
      tenant: 'acme',
      agent: 'echo',
      state: 'submitted',
      deliveredTurn: 0,
      agentTaskId: null,
      contextId: 'c1',
      statusMessage: null,
      history: [],
      artifacts: [],
      version,
      ...from,
    } as StoredTask;
    const agent = {
      tenant: 'acme',
      name: 'echo',
      style: 'url',
      updatedAt: new Date(0),
      card: { capabilities: { streaming } },
    };
    const relay = new TaskRelay(
      tasks as unknown as A2ATaskStore,
      {} as A2AAgentStore,
      { clientFor: async () => client } as unknown as AgentClients,
      { read: async () => frame },
      { publish: async () => undefined },
    );
    const deliver = () =>
      relay.deliver(ids, undefined, {
        signal: new AbortController().signal,
        callTimeoutMs: 1000,
        known: { task, agent: agent as never, frame },
        onChange,
      });
    /** The delivery after the first one (an activity, told of each change), from the task as last recorded. */
    const deliverAgain = (told: (task: StoredTask) => void) =>
      relay.deliver(ids, undefined, {
        signal: new AbortController().signal,
        callTimeoutMs: 1000,
        known: { task: latest!, agent: agent as never, frame },
        onChange: told,
      });
    return { deliver, deliverAgain, changes };
  };

  it('records the send and then each event of the stream, in order: every status, each artifact chunk appended; no GetTask', async () => {
    const stream = events([
      taskEvent(TaskState.TASK_STATE_SUBMITTED),
      status(TaskState.TASK_STATE_WORKING, 'step 1'),
      status(TaskState.TASK_STATE_WORKING, 'step 2'),
      artifact('forty-', false),
      artifact('two', true),
      status(TaskState.TASK_STATE_COMPLETED, 'done'),
    ]);
    const client = { sendMessageStream: jest.fn(() => stream), sendMessage: jest.fn(), getTask: jest.fn() };
    const { deliver, changes } = setup(client);
    await expect(deliver()).resolves.toBe('completed');
    expect(changes.map(summary)).toEqual([
      'submitted /  /  / 1',
      'working / step 1 /  / ',
      'working / step 2 /  / ',
      'working / step 2 / forty- / ',
      'working / step 2 / forty-two / ',
      'completed / done / forty-two / ',
    ]);
    expect(client.sendMessage).not.toHaveBeenCalled();
    expect(client.getTask).not.toHaveBeenCalled();
  });

  it('follows a task already sent with SubscribeToTask: its snapshot, then its events, to the end', async () => {
    const client = {
      resubscribeTask: jest.fn(() =>
        events([
          taskEvent(TaskState.TASK_STATE_WORKING),
          status(TaskState.TASK_STATE_WORKING, 'halfway'),
          status(TaskState.TASK_STATE_COMPLETED, 'done'),
        ]),
      ),
      getTask: jest.fn(),
    };
    const { deliver, changes } = setup(client, { state: 'working', deliveredTurn: 1, agentTaskId: 'a1' });
    await expect(deliver()).resolves.toBe('completed');
    expect(client.resubscribeTask).toHaveBeenCalledWith({ tenant: '', id: 'a1' }, expect.anything());
    expect(changes.map(summary)).toEqual(['working / halfway /  / ', 'completed / done /  / ']);
    expect(client.getTask).not.toHaveBeenCalled();
  });

  it('records nothing for an event that repeats what is recorded (the snapshot of a task subscribed again), whatever the key order Postgres keeps', async () => {
    const halfway = status(TaskState.TASK_STATE_WORKING, 'halfway');
    const snapshot = {
      ...agentTask(TaskState.TASK_STATE_WORKING),
      status: (halfway.payload!.value as { status: Task['status'] }).status,
    };
    const client = {
      resubscribeTask: jest.fn(() =>
        events([
          halfway,
          { payload: { $case: 'task', value: snapshot } },
          status(TaskState.TASK_STATE_COMPLETED, 'done'),
        ]),
      ),
    };
    const { deliver, changes } = setup(client, { state: 'working', deliveredTurn: 1, agentTaskId: 'a1' });
    await expect(deliver()).resolves.toBe('completed');
    expect(changes.map(summary)).toEqual(['working / halfway /  / ', 'completed / done /  / ']);
  });

  it('subscribes again when the stream breaks after its first event, and asks GetTask when the agent refuses a stream', async () => {
    const client = {
      resubscribeTask: jest
        .fn()
        .mockImplementationOnce(() =>
          events(
            [taskEvent(TaskState.TASK_STATE_WORKING), status(TaskState.TASK_STATE_WORKING, 'halfway')],
            new Error('socket hang up'),
          ),
        )
        .mockImplementationOnce(() => events([], new UnsupportedOperationError('the task ended'))),
      getTask: jest.fn(async () => ({
        ...agentTask(TaskState.TASK_STATE_COMPLETED),
        status: { state: TaskState.TASK_STATE_COMPLETED, message: message('done'), timestamp: undefined },
      })),
    };
    const { deliver, changes } = setup(client, { state: 'working', deliveredTurn: 1, agentTaskId: 'a1' });
    await expect(deliver()).resolves.toBe('completed');
    expect(client.resubscribeTask).toHaveBeenCalledTimes(2);
    expect(client.getTask).toHaveBeenCalledTimes(1);
    expect(changes.map(summary)).toEqual(['working / halfway /  / ', 'completed / done /  / ']);
  });

  it("an agent unreachable on the send's stream is tried again (AgentUnreachable), with the stream's call aborted", async () => {
    let signal: AbortSignal | undefined;
    const client = {
      sendMessageStream: jest.fn((_params: unknown, options: { signal: AbortSignal }) => {
        signal = options.signal;
        return events([], new TypeError('fetch failed'));
      }),
    };
    const { deliver, changes } = setup(client);
    await expect(deliver()).rejects.toBeInstanceOf(AgentUnreachable);
    expect(signal?.aborted).toBe(true);
    expect(changes).toEqual([]);
  });

  describe('a delivery told of each change (an activity: it signals its workflow)', () => {
    afterEach(() => jest.useRealTimers());
    /** The send's stream: the task, step 1, then nothing until `go()`, then step 2 and the completion. */
    const paused = () => {
      let go!: () => void;
      const gate = new Promise<void>((resolve) => (go = resolve));
      async function* stream(): AsyncGenerator<StreamResponse, void, undefined> {
        yield taskEvent(TaskState.TASK_STATE_SUBMITTED);
        yield status(TaskState.TASK_STATE_WORKING, 'step 1');
        await gate;
        yield status(TaskState.TASK_STATE_WORKING, 'step 2');
        yield status(TaskState.TASK_STATE_COMPLETED, 'done');
      }
      return {
        go,
        client: { sendMessageStream: jest.fn(() => stream()), resubscribeTask: jest.fn(), getTask: jest.fn() },
      };
    };

    it("keeps listening on the send's stream past the first attempt's moment, telling each change that did not settle the task", async () => {
      jest.useFakeTimers();
      const { go, client } = paused();
      const told: string[] = [];
      const { deliver, changes } = setup(client, {}, true, (task) => told.push(`${task.state}@${task.version}`));
      let answered: string | undefined;
      const delivery = deliver().then((state) => (answered = state));
      await jest.advanceTimersByTimeAsync(5000);
      expect(answered).toBeUndefined();
      expect(told).toEqual(['submitted@1', 'working@2']);
      go();
      await delivery;
      expect(answered).toBe('completed');
      expect(changes.map(summary)).toEqual([
        'submitted /  /  / 1',
        'working / step 1 /  / ',
        'working / step 2 /  / ',
        'completed / done /  / ',
      ]);
      // The settled change is the delivery's answer, not a signal.
      expect(told).toEqual(['submitted@1', 'working@2', 'working@3']);
      expect(client.resubscribeTask).not.toHaveBeenCalled();
      expect(client.getTask).not.toHaveBeenCalled();
    });

    it('(a first attempt, told nothing, answers once its moment has passed: the workflow follows on)', async () => {
      jest.useFakeTimers();
      const { go, client } = paused();
      const { deliver, changes } = setup(client);
      const delivery = deliver();
      await jest.advanceTimersByTimeAsync(1500);
      await expect(delivery).resolves.toBe('working');
      go();
      expect(changes.map(summary)).toEqual(['submitted /  /  / 1', 'working / step 1 /  / ']);
    });

    it("a first attempt's stream left open is read on by the delivery after it: what the agent sent in between is recorded, no subscribe", async () => {
      jest.useFakeTimers();
      const { go, client } = paused();
      const { deliver, deliverAgain, changes } = setup(client);
      const first = deliver();
      await jest.advanceTimersByTimeAsync(1500);
      await expect(first).resolves.toBe('working');
      // The agent goes on while no delivery reads its stream (the workflow between the two deliveries).
      go();
      jest.useRealTimers();
      const told: string[] = [];
      await expect(deliverAgain((task) => told.push(task.state))).resolves.toBe('completed');
      expect(changes.map(summary)).toEqual([
        'submitted /  /  / 1',
        'working / step 1 /  / ',
        'working / step 2 /  / ',
        'completed / done /  / ',
      ]);
      expect(told).toEqual(['working']);
      expect(client.sendMessageStream).toHaveBeenCalledTimes(1);
      expect(client.resubscribeTask).not.toHaveBeenCalled();
      expect(client.getTask).not.toHaveBeenCalled();
    });

    it("subscribes again when the send's stream ends before the task settled (no GetTask)", async () => {
      const client = {
        sendMessageStream: jest.fn(() =>
          events([taskEvent(TaskState.TASK_STATE_SUBMITTED), status(TaskState.TASK_STATE_WORKING, 'step 1')]),
        ),
        resubscribeTask: jest.fn(() =>
          events([taskEvent(TaskState.TASK_STATE_WORKING), status(TaskState.TASK_STATE_COMPLETED, 'done')]),
        ),
        getTask: jest.fn(),
      };
      const told: string[] = [];
      const { deliver } = setup(client, {}, true, (task) => told.push(task.state));
      await expect(deliver()).resolves.toBe('completed');
      expect(client.resubscribeTask).toHaveBeenCalledTimes(1);
      expect(client.getTask).not.toHaveBeenCalled();
      // The snapshot (working, no status message) is a change too.
      expect(told).toEqual(['submitted', 'working', 'working']);
    });
  });

  it('an agent whose card does not say it streams is sent the turn with SendMessage, never a stream', async () => {
    const client = {
      sendMessage: jest.fn(async () => agentTask(TaskState.TASK_STATE_COMPLETED)),
      sendMessageStream: jest.fn(),
    };
    const { deliver } = setup(client, {}, false);
    await expect(deliver()).resolves.toBe('completed');
    expect(client.sendMessageStream).not.toHaveBeenCalled();
  });
});

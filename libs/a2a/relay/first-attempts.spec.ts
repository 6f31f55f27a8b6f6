import type { EventFrame } from '@libs/frame';
import type { TaskIds, TaskRequestRecord } from '../../../contracts';
import type { StoredAgent } from '../agents/agent-store';
import { FirstAttempt, FirstAttempts } from './first-attempts';
import type { DeliveryContext } from './task-relay';
import type { A2AState } from '../tasks/task-states';
import type { StoredTask } from '../tasks/task-store';

/** A relay whose deliveries end when the test says: each call is kept with its context. */
class HeldRelay {
  readonly calls: {
    ids: TaskIds;
    request?: TaskRequestRecord;
    ctx: DeliveryContext;
    turn?: number;
    end: (state: A2AState) => void;
    fail: (e: Error) => void;
  }[] = [];
  deliver(
    ids: TaskIds,
    request: TaskRequestRecord | undefined,
    ctx: DeliveryContext,
    turn?: number,
  ): Promise<A2AState> {
    return new Promise((resolve, reject) => this.calls.push({ ids, request, ctx, turn, end: resolve, fail: reject }));
  }
}

const frame = { id: 'task-1', source: '/a2a', type: 'a2a.task', specversion: '1.0', extensions: {} } as EventFrame;
const task = { id: 'task-1', tenant: 't', agent: 'echo', state: 'submitted' } as StoredTask;
const agent = { tenant: 't', name: 'echo', style: 'url' } as StoredAgent;
const attempt = (taskId = 'task-1', over: Partial<FirstAttempt> = {}): FirstAttempt => ({
  ids: { taskId, tenant: 't', agent: 'echo' },
  turn: 1,
  frame,
  callTimeoutMs: 1000,
  timeoutMs: 60_000,
  task,
  agent,
  ...over,
});
const never = () => new AbortController().signal;
/** The local activity's own delivery: a state that tells it apart from the attempt's. */
const itself = jest.fn(() => Promise.resolve<A2AState>('working'));
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('FirstAttempts', () => {
  beforeEach(() => itself.mockClear());
  afterEach(() => jest.useRealTimers());

  it('begins the delivery with the task, agent and frame it was given, and hands its outcome to the local activity', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, never());
    expect(attempts.expect('task-1', 1)).toBe(true);
    expect(attempts.expect('task-1', 1)).toBe(false); // announced once
    attempts.begin(attempt('task-1', { callTimeoutMs: 1000 }));
    attempts.begin(attempt()); // begun once
    expect(relay.calls).toHaveLength(1);
    expect(relay.calls[0].ctx).toMatchObject({ callTimeoutMs: 1000, known: { task, agent, frame } });
    expect([relay.calls[0].turn, relay.calls[0].request]).toEqual([1, undefined]);

    const adopted = attempts.run('task-1', 1, never(), itself);
    relay.calls[0].end('completed');
    await expect(adopted).resolves.toBe('completed');
    expect(itself).not.toHaveBeenCalled();
    // Adopted once: a second local activity of the turn (the workflow task tried again) delivers itself.
    await expect(attempts.run('task-1', 1, never(), itself)).resolves.toBe('working');
    expect(attempts.stats()).toEqual({ begun: 1, adopted: 1, refused: 0, held: 0 });
  });

  it('makes a local activity that runs before the attempt begins wait for it, and deliver itself when it is withdrawn', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, never());
    attempts.expect('task-1', 1);
    const waiting = attempts.run('task-1', 1, never(), itself);
    await settle();
    expect(itself).not.toHaveBeenCalled();
    attempts.begin(attempt());
    relay.calls[0].end('completed');
    await expect(waiting).resolves.toBe('completed');
    expect(itself).not.toHaveBeenCalled();

    attempts.expect('task-2', 1);
    const withdrawn = attempts.run('task-2', 1, never(), itself);
    attempts.withdraw('task-2', 1);
    await expect(withdrawn).resolves.toBe('working');
    expect(itself).toHaveBeenCalledTimes(1);
    expect(relay.calls).toHaveLength(1);
  });

  it('lets a local activity with no attempt announced, or of another turn, deliver itself', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, never());
    attempts.expect('task-1', 1);
    attempts.begin(attempt());
    await expect(attempts.run('task-1', 2, never(), itself)).resolves.toBe('working');
    await expect(attempts.run('task-9', 1, never(), itself)).resolves.toBe('working');
    expect(itself).toHaveBeenCalledTimes(2);
    expect(attempts.stats()).toMatchObject({ adopted: 0, held: 1 });
    relay.calls[0].end('completed');
  });

  it('aborts the delivery when its local activity is canceled; one canceled while it waited sends nothing', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, never());
    attempts.expect('task-1', 1);
    attempts.begin(attempt());
    const activity = new AbortController();
    const adopted = attempts.run('task-1', 1, activity.signal, itself);
    await settle();
    expect(relay.calls[0].ctx.signal.aborted).toBe(false);
    activity.abort(new Error('canceled'));
    expect(relay.calls[0].ctx.signal.aborted).toBe(true);
    relay.calls[0].fail(new Error('aborted'));
    await expect(adopted).rejects.toThrow('aborted');

    attempts.expect('task-2', 1);
    const canceled = new AbortController();
    const waiting = attempts.run('task-2', 1, canceled.signal, itself);
    canceled.abort(new Error('canceled while waiting'));
    await expect(waiting).rejects.toThrow('canceled while waiting');
    attempts.begin(attempt('task-2'));
    expect(relay.calls).toHaveLength(1);
    expect(itself).not.toHaveBeenCalled();
  });

  it('hands a failure to the local activity (the workflow retries), and a failure nobody adopts is no unhandled rejection', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, never());
    for (const id of ['task-1', 'task-2']) {
      attempts.expect(id, 1);
      attempts.begin(attempt(id));
    }
    relay.calls[0].fail(new Error('the agent could not be reached'));
    relay.calls[1].fail(new Error('never adopted'));
    await settle();
    await expect(attempts.run('task-1', 1, never(), itself)).rejects.toThrow('the agent could not be reached');
  });

  it('keeps an outcome that ended for 10 s for its local activity, then drops it', async () => {
    jest.useFakeTimers();
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, never());
    for (const id of ['task-1', 'task-2']) {
      attempts.expect(id, 1);
      attempts.begin(attempt(id));
    }
    relay.calls[0].end('completed');
    relay.calls[1].end('working');
    await Promise.resolve();
    await Promise.resolve();
    jest.advanceTimersByTime(9_999);
    await expect(attempts.run('task-1', 1, never(), itself)).resolves.toBe('completed');
    jest.advanceTimersByTime(1);
    expect(attempts.stats().held).toBe(0);
    await expect(attempts.run('task-2', 1, never(), itself)).resolves.toBe('working');
    expect(itself).toHaveBeenCalledTimes(1);
  });

  it('lets the local activity deliver itself when an announced attempt is neither begun nor withdrawn within 10 s', async () => {
    jest.useFakeTimers();
    const attempts = new FirstAttempts(new HeldRelay(), never());
    attempts.expect('task-1', 1);
    const waiting = attempts.run('task-1', 1, never(), itself);
    jest.advanceTimersByTime(10_000);
    await expect(waiting).resolves.toBe('working');
    expect(attempts.stats().held).toBe(0);
  });

  it("bounds the delivery by the task's deadline when that comes before the first attempt's bound", async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, never());
    attempts.expect('task-1', 1);
    attempts.begin(attempt('task-1', { timeoutMs: 30 }));
    const signal = relay.calls[0].ctx.signal;
    await new Promise<void>((resolve, reject) => {
      signal.addEventListener('abort', () => resolve());
      setTimeout(() => reject(new Error('the delivery was not aborted within 5 s')), 5000).unref();
    });
    expect(signal.aborted).toBe(true);
  });

  it('stops every delivery when the instance shuts down, and announces none after', () => {
    const relay = new HeldRelay();
    const shutdown = new AbortController();
    const attempts = new FirstAttempts(relay, shutdown.signal);
    attempts.expect('task-1', 1);
    attempts.begin(attempt());
    shutdown.abort();
    expect(relay.calls[0].ctx.signal.aborted).toBe(true);
    expect(attempts.expect('task-2', 1)).toBe(false);
    attempts.begin(attempt('task-2'));
    expect(relay.calls).toHaveLength(1);
  });

  it('holds at most 1000: an ended one goes to make room, the others are never dropped (no new one is announced)', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, never());
    for (let i = 0; i < 1000; i++) {
      attempts.expect(`t${i}`, 1);
      attempts.begin(attempt(`t${i}`));
    }
    expect(attempts.expect('one-more', 1)).toBe(false);
    expect(attempts.stats()).toMatchObject({ begun: 1000, refused: 1, held: 1000 });
    relay.calls[0].end('completed');
    await settle();
    expect(attempts.expect('one-more', 1)).toBe(true);
    expect(attempts.stats()).toMatchObject({ refused: 1, held: 1000 });
    await expect(attempts.run('t0', 1, never(), itself)).resolves.toBe('working');
    for (const call of relay.calls) call.end('completed');
  });
});

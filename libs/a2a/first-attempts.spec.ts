import type { TaskRequestRecord } from '../../workflows/a2a-task.definitions';
import type { StoredAgent } from './agent-store';
import { FirstAttempt, FirstAttempts } from './first-attempts';
import type { DeliveryContext, TaskIds } from './task-relay';
import type { A2AState } from './task-states';
import type { StoredTask } from './task-store';

/** A relay whose deliveries end when the test says: each call is kept with its context. */
class HeldRelay {
  readonly calls: { ids: TaskIds; ctx: DeliveryContext; turn?: number; end: (state: A2AState) => void; fail: (e: Error) => void }[] = [];
  deliver(ids: TaskIds, _request: TaskRequestRecord, ctx: DeliveryContext, turn?: number): Promise<A2AState> {
    return new Promise((resolve, reject) => this.calls.push({ ids, ctx, turn, end: resolve, fail: reject }));
  }
}

const record: TaskRequestRecord = { topic: 'a2a.t.echo.requests', partition: 0, offset: 7 };
const task = { id: 'task-1', tenant: 't', agent: 'echo', state: 'submitted' } as StoredTask;
const agent = { tenant: 't', name: 'echo', style: 'url' } as StoredAgent;
const attempt = (over: Partial<FirstAttempt> = {}): FirstAttempt => ({
  ids: { taskId: 'task-1', tenant: 't', agent: 'echo' },
  request: record,
  turn: 1,
  callTimeoutMs: 1000,
  timeoutMs: 60_000,
  returnOnChange: false,
  task,
  agent,
  ...over,
});

describe('FirstAttempts', () => {
  afterEach(() => jest.useRealTimers());

  it('begins the delivery at once with the task and agent it was given, and hands its outcome to one local activity', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, new AbortController().signal);
    attempts.begin(attempt({ returnOnChange: true }));
    attempts.begin(attempt()); // the same turn again: not a second delivery
    expect(relay.calls).toHaveLength(1);
    expect(relay.calls[0].ctx).toMatchObject({ callTimeoutMs: 1000, returnOnChange: true, known: { task, agent } });
    expect(relay.calls[0].turn).toBe(1);

    const adopted = attempts.adopt('task-1', 1, record, new AbortController().signal);
    expect(adopted).toBeDefined();
    expect(attempts.adopt('task-1', 1, record, new AbortController().signal)).toBeUndefined();
    relay.calls[0].end('completed');
    await expect(adopted).resolves.toBe('completed');
    expect(attempts.stats()).toEqual({ begun: 1, adopted: 1, refused: 0, held: 0 });
  });

  it('is not adopted for another turn or another request record', () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, new AbortController().signal);
    attempts.begin(attempt());
    expect(attempts.adopt('task-1', 2, record, new AbortController().signal)).toBeUndefined();
    expect(attempts.adopt('task-1', 1, { ...record, offset: 8 }, new AbortController().signal)).toBeUndefined();
    expect(attempts.adopt('task-2', 1, record, new AbortController().signal)).toBeUndefined();
    expect(attempts.stats()).toMatchObject({ adopted: 0, held: 1 });
  });

  it('aborts the delivery when its local activity is canceled, also when it was canceled before it adopted', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, new AbortController().signal);
    attempts.begin(attempt());
    const activity = new AbortController();
    const adopted = attempts.adopt('task-1', 1, record, activity.signal)!;
    expect(relay.calls[0].ctx.signal.aborted).toBe(false);
    activity.abort(new Error('canceled'));
    expect(relay.calls[0].ctx.signal.aborted).toBe(true);
    relay.calls[0].fail(new Error('aborted'));
    await expect(adopted).rejects.toThrow('aborted');

    attempts.begin(attempt({ ids: { taskId: 'task-2', tenant: 't', agent: 'echo' } }));
    const canceled = new AbortController();
    canceled.abort();
    void attempts.adopt('task-2', 1, record, canceled.signal)?.catch(() => undefined);
    expect(relay.calls[1].ctx.signal.aborted).toBe(true);
  });

  it('hands a failure to the local activity (the workflow retries), and a failure nobody adopts is no unhandled rejection', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, new AbortController().signal);
    attempts.begin(attempt());
    attempts.begin(attempt({ ids: { taskId: 'task-2', tenant: 't', agent: 'echo' } }));
    relay.calls[0].fail(new Error('the agent could not be reached'));
    relay.calls[1].fail(new Error('never adopted'));
    await new Promise((resolve) => setImmediate(resolve));
    await expect(attempts.adopt('task-1', 1, record, new AbortController().signal)).rejects.toThrow('the agent could not be reached');
  });

  it('keeps an outcome that ended for 10 s for its local activity, then drops it', async () => {
    jest.useFakeTimers();
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, new AbortController().signal);
    attempts.begin(attempt());
    attempts.begin(attempt({ ids: { taskId: 'task-2', tenant: 't', agent: 'echo' } }));
    relay.calls[0].end('completed');
    relay.calls[1].end('working');
    await Promise.resolve();
    await Promise.resolve();
    jest.advanceTimersByTime(9_999);
    await expect(attempts.adopt('task-1', 1, record, new AbortController().signal)).resolves.toBe('completed');
    jest.advanceTimersByTime(1);
    expect(attempts.adopt('task-2', 1, record, new AbortController().signal)).toBeUndefined();
    expect(attempts.stats().held).toBe(0);
  });

  it('bounds the delivery by the task\'s deadline when that comes before the first attempt\'s bound', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, new AbortController().signal);
    attempts.begin(attempt({ timeoutMs: 30 }));
    const signal = relay.calls[0].ctx.signal;
    const started = Date.now();
    await new Promise<void>((resolve, reject) => {
      signal.addEventListener('abort', () => resolve());
      setTimeout(() => reject(new Error('the delivery was not aborted within 5 s')), 5000).unref();
    });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('stops every delivery when the instance shuts down, and begins none after', () => {
    const relay = new HeldRelay();
    const shutdown = new AbortController();
    const attempts = new FirstAttempts(relay, shutdown.signal);
    attempts.begin(attempt());
    shutdown.abort();
    expect(relay.calls[0].ctx.signal.aborted).toBe(true);
    attempts.begin(attempt({ ids: { taskId: 'task-2', tenant: 't', agent: 'echo' } }));
    expect(relay.calls).toHaveLength(1);
  });

  it('holds at most 1000: an ended one goes to make room, running ones are never dropped (no new one begins)', async () => {
    const relay = new HeldRelay();
    const attempts = new FirstAttempts(relay, new AbortController().signal);
    for (let i = 0; i < 1000; i++) attempts.begin(attempt({ ids: { taskId: `t${i}`, tenant: 't', agent: 'echo' } }));
    attempts.begin(attempt({ ids: { taskId: 'one-more', tenant: 't', agent: 'echo' } }));
    expect(attempts.stats()).toMatchObject({ begun: 1000, refused: 1, held: 1000 });
    relay.calls[0].end('completed');
    await new Promise((resolve) => setImmediate(resolve));
    attempts.begin(attempt({ ids: { taskId: 'one-more', tenant: 't', agent: 'echo' } }));
    expect(attempts.stats()).toMatchObject({ begun: 1001, refused: 1, held: 1000 });
    expect(attempts.adopt('t0', 1, record, new AbortController().signal)).toBeUndefined();
    for (const call of relay.calls) call.end('completed');
  });
});

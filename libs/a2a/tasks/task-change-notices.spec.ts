import { waitFor } from '../../../test/support/wait-for';
import { TaskChangeNotices } from './task-change-notices';
import type { A2AState } from './task-states';
import type { StoredTask } from './task-store';

const at = (version: number, state: A2AState = 'working') => ({ id: 't1', state, version }) as StoredTask;
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A signal call the test answers: each call waits until the test resolves or rejects it. */
class HeldSignals {
  readonly calls: { version: number; state: A2AState; resolve: () => void; reject: (e: Error) => void }[] = [];
  changed(_taskId: string, state: A2AState, version: number): Promise<void> {
    return new Promise((resolve, reject) => this.calls.push({ version, state, resolve, reject }));
  }
}

describe('TaskChangeNotices', () => {
  it('sends at most one signal at a time, the next one with the latest change recorded meanwhile', async () => {
    const signals = new HeldSignals();
    const notices = new TaskChangeNotices('t1', signals, 0);
    notices.changed(at(1));
    notices.changed(at(2));
    notices.changed(at(3, 'input-required'));
    await tick();
    expect(signals.calls.map((c) => c.version)).toEqual([1]);
    signals.calls[0].resolve();
    await tick();
    expect(signals.calls.map((c) => [c.version, c.state])).toEqual([
      [1, 'working'],
      [3, 'input-required'],
    ]);
    signals.calls[1].resolve();
    await notices.close(1000);
    expect(signals.calls).toHaveLength(2);
  });

  it('never tells an older change after a newer one', async () => {
    const signals = new HeldSignals();
    const notices = new TaskChangeNotices('t1', signals, 0);
    notices.changed(at(5));
    notices.changed(at(4));
    await tick();
    signals.calls[0].resolve();
    await notices.close(1000);
    expect(signals.calls.map((c) => c.version)).toEqual([5]);
  });

  it('tries a failed signal again, with the latest change', async () => {
    const signals = new HeldSignals();
    const notices = new TaskChangeNotices('t1', signals, 0);
    notices.changed(at(1));
    await tick();
    notices.changed(at(2));
    signals.calls[0].reject(new Error('UNAVAILABLE'));
    await waitFor('the signal tried again', () => signals.calls.length === 2, { timeoutMs: 2000, intervalMs: 10 });
    expect(signals.calls.map((c) => c.version)).toEqual([1, 2]);
    signals.calls[1].resolve();
    await notices.close(1000);
  });

  it("closing waits for the signal in flight (the workflow hears it before the delivery's answer), then sends nothing more", async () => {
    const signals = new HeldSignals();
    const notices = new TaskChangeNotices('t1', signals, 0);
    notices.changed(at(1));
    await tick();
    let closed = false;
    const closing = notices.close(10_000).then(() => (closed = true));
    await tick();
    expect(closed).toBe(false);
    signals.calls[0].resolve();
    await closing;
    notices.changed(at(2));
    await tick();
    expect(signals.calls.map((c) => c.version)).toEqual([1]);
  });

  it('waits the gap after a signal before the next, and none when the delivery ends', async () => {
    const signals = new HeldSignals();
    const notices = new TaskChangeNotices('t1', signals, 60_000);
    notices.changed(at(1));
    await tick();
    signals.calls[0].resolve();
    await tick();
    notices.changed(at(2));
    await tick();
    // Within the gap (a minute here): not sent yet.
    expect(signals.calls.map((c) => c.version)).toEqual([1]);
    // The delivery ends: the last change goes at once.
    const closing = notices.close(10_000);
    await waitFor('the last change signalled', () => signals.calls.length === 2, { timeoutMs: 2000, intervalMs: 10 });
    expect(signals.calls[1].version).toBe(2);
    signals.calls[1].resolve();
    await closing;
  });

  it('closing stops a signal that keeps failing once its wait is over', async () => {
    const signals = { changed: jest.fn(() => Promise.reject(new Error('UNAVAILABLE'))) };
    const notices = new TaskChangeNotices('t1', signals, 0);
    notices.changed(at(1));
    await notices.close(50);
    const calls = signals.changed.mock.calls.length;
    // Three retry periods (100 ms, then 200 ms): none is tried after the close.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(signals.changed.mock.calls.length).toBe(calls);
  });
});

import { TaskSettlements } from './task-settlements';
import type { StoredTask } from './task-store';

const task = (id: string) => ({ id, state: 'completed' }) as StoredTask;

describe('TaskSettlements', () => {
  it('wakes every waiter of a task when it settles, and no other', async () => {
    const settlements = new TaskSettlements();
    const woke: string[] = [];
    const never = new AbortController().signal;
    const a1 = settlements.wait('a', never).then(() => woke.push('a1'));
    const a2 = settlements.wait('a', never).then(() => woke.push('a2'));
    void settlements.wait('b', never).then(() => woke.push('b'));
    settlements.settled(task('a'));
    await Promise.all([a1, a2]);
    await new Promise(setImmediate);
    expect(woke.sort()).toEqual(['a1', 'a2']);
    expect(settlements.waiting).toBe(1);
  });

  it('hands its waiters the task as committed when the news carries it; one that came after the news gets none (it reads the task)', async () => {
    const settlements = new TaskSettlements();
    const committed = { id: 'a', state: 'completed', version: 2 } as StoredTask;
    const waiting = settlements.wait('a', new AbortController().signal);
    settlements.settled(committed);
    await expect(waiting).resolves.toBe(committed);
    await expect(settlements.wait('a', new AbortController().signal)).resolves.toBeUndefined();
    const aborted = new AbortController();
    const gaveUp = settlements.wait('b', aborted.signal);
    aborted.abort();
    await expect(gaveUp).resolves.toBeUndefined();
  });

  it('does not wait for a task that settled before the waiter came, until a new turn of it starts', async () => {
    const settlements = new TaskSettlements();
    settlements.settled(task('a'));
    await expect(settlements.wait('a', new AbortController().signal)).resolves.toBeUndefined();
    settlements.forget('a');
    let woke = false;
    void settlements.wait('a', new AbortController().signal).then(() => (woke = true));
    await new Promise(setImmediate);
    expect(woke).toBe(false);
    settlements.settled(task('a'));
    await new Promise(setImmediate);
    expect(woke).toBe(true);
  });

  it('lets a waiter go when its signal aborts, leaving nothing registered', async () => {
    const settlements = new TaskSettlements();
    const controller = new AbortController();
    const waiting = settlements.wait('a', controller.signal);
    expect(settlements.waiting).toBe(1);
    controller.abort();
    await waiting;
    expect(settlements.waiting).toBe(0);
  });
});

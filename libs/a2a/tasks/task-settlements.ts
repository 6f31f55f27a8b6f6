import type { StoredTask } from './task-store';

/** How many settled task ids are remembered for a waiter that comes after the news. */
const MAX_RECENT = 10_000;

/**
 * News, inside one process, of the tasks this process's A2A worker settled: a blocking send waiting in the same
 * process answers as soon as the delivery recorded the outcome in Postgres, instead of when the task's workflow has
 * completed (its next workflow task and the result's long poll). With eager workflow start and eager activities the
 * delivery of a task usually runs in the process that took it. The news carries the task as committed (the waiter then
 * reads nothing back); a waiter that came after the news reads the task from Postgres. The waiter also waits for the workflow's result, which is what
 * answers when the delivery ran elsewhere.
 */
export class TaskSettlements {
  private readonly waiters = new Map<string, Set<(task: StoredTask | undefined) => void>>();
  /** Ids settled lately, oldest first: a waiter that comes after the news does not wait. */
  private readonly recent = new Set<string>();

  /** The task was committed here in a settled state (terminal, or waiting for the client). */
  settled(task: StoredTask): void {
    const taskId = task.id;
    this.recent.add(taskId);
    if (this.recent.size > MAX_RECENT) this.recent.delete(this.recent.values().next().value!);
    const waiting = this.waiters.get(taskId);
    if (!waiting) return;
    this.waiters.delete(taskId);
    for (const wake of waiting) wake(task);
  }

  /**
   * Forgets that the task settled: a new turn of it starts (a message continuing it after it asked for input),
   * whose settling is news again.
   */
  forget(taskId: string): void {
    this.recent.delete(taskId);
  }

  /**
   * Resolves with the task as committed when it is settled here; with nothing when it was lately (before the wait),
   * or when `signal` aborts. Never rejects.
   */
  wait(taskId: string, signal: AbortSignal): Promise<StoredTask | undefined> {
    if (this.recent.has(taskId) || signal.aborted) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      let waiting = this.waiters.get(taskId);
      if (!waiting) this.waiters.set(taskId, (waiting = new Set()));
      const set = waiting;
      const done = (task: StoredTask | undefined) => {
        set.delete(done);
        if (set.size === 0 && this.waiters.get(taskId) === set) this.waiters.delete(taskId);
        signal.removeEventListener('abort', aborted);
        resolve(task);
      };
      const aborted = () => done(undefined);
      set.add(done);
      signal.addEventListener('abort', aborted, { once: true });
    });
  }

  /** Tasks waited for now (for tests and stats). */
  get waiting(): number {
    return this.waiters.size;
  }
}

import { setTimeout as sleep } from 'node:timers/promises';
import { backoff, RetryPolicy } from '@libs/delivery';
import { createLogger } from '@libs/logging';
import type { A2AState } from './task-states';
import type { StoredTask } from './task-store';

const log = createLogger('A2AChangeNotices');

/** Tells a task's workflow of a change recorded in Postgres (the `changed` signal: its state and version). */
export interface TaskChangeSignals {
  changed(taskId: string, state: A2AState, version: number): Promise<void>;
}

/** The wait after a signal that failed (Temporal unreachable): the deliveries' backoff, 100 ms doubling to 2 s, no attempt limit. */
const SIGNAL_RETRY: RetryPolicy = { initialMs: 100, maxMs: 2000, maxAttempts: Infinity };
/** The least time between two signals of one delivery: an agent that reports many changes a second costs Temporal at most this many workflow tasks. */
export const SIGNAL_GAP_MS = 100;

/**
 * The changes one delivery records, told to the task's workflow while the delivery follows on (activities/a2a-task.
 * activities.ts): the workflow records each state as its search attribute and pushes the task to its push configs,
 * and the delivery never stops listening to the agent to let it. Coalesced: at most one signal in flight, at least
 * {@link SIGNAL_GAP_MS} after the one before (but at once when the delivery ends), and the next one carries the
 * latest change recorded meanwhile (each push sends the task as it is then, so nothing is lost by skipping the ones
 * between); a signal that fails is tried again with backoff, the latest change again. Only ids, a state and a
 * version are sent.
 */
export class TaskChangeNotices {
  private latest?: { state: A2AState; version: number };
  private sentVersion = 0;
  private draining?: Promise<void>;
  private readonly stop = new AbortController();
  /** Aborted when the delivery ends: the last change is told without waiting for the gap. */
  private readonly hurry = new AbortController();
  private lastSentAt = -Infinity;

  constructor(
    private readonly taskId: string,
    private readonly signals: TaskChangeSignals,
    private readonly gapMs = SIGNAL_GAP_MS,
  ) {}

  /** A change of the task the delivery recorded (it has not settled: the delivery's own answer says that). */
  changed(task: StoredTask): void {
    if (this.stop.signal.aborted) return;
    if (!this.latest || task.version > this.latest.version) this.latest = { state: task.state, version: task.version };
    this.draining ??= this.drain().finally(() => (this.draining = undefined));
  }

  /**
   * Waits at most `waitMs` for the latest change to be told, then stops (no signal is sent after). The delivery
   * answers its workflow only after this, so the workflow sees its signals before its answer.
   */
  async close(waitMs: number): Promise<void> {
    this.hurry.abort();
    if (this.draining && waitMs > 0) await Promise.race([this.draining, sleep(waitMs, undefined, { ref: false })]);
    this.stop.abort();
  }

  private async drain(): Promise<void> {
    for (let failures = 0; this.latest && this.latest.version > this.sentVersion && !this.stop.signal.aborted;) {
      const gap = this.lastSentAt + this.gapMs - Date.now();
      if (gap > 0 && !this.hurry.signal.aborted)
        await sleep(gap, undefined, { signal: this.hurry.signal }).catch(() => undefined);
      if (this.stop.signal.aborted) return;
      const change = this.latest;
      try {
        await this.signals.changed(this.taskId, change.state, change.version);
        this.sentVersion = change.version;
        this.lastSentAt = Date.now();
        failures = 0;
      } catch (e) {
        failures++;
        log.warn(
          { task: this.taskId, version: change.version, failures, error: (e as Error).message },
          "could not tell the task's workflow of a change; trying again",
        );
        await sleep(backoff(SIGNAL_RETRY, failures), undefined, { signal: this.stop.signal }).catch(() => undefined);
      }
    }
  }
}

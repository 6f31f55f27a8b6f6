import { firstAttemptTimeoutMs, type TaskRequestRecord } from '../../workflows/a2a-task.definitions';
import type { StoredAgent } from './agent-store';
import type { A2AState } from './task-states';
import type { DeliveryContext, TaskIds } from './task-relay';
import type { StoredTask } from './task-store';

/** How long an attempt that ended waits to be adopted by its local activity before it is dropped. */
const ENDED_TTL_MS = 10_000;
/** Most attempts held at once (running or ended); past it, the oldest ended one goes first, and no new one begins. */
const MAX_HELD = 1000;

/** What delivers: the task relay (task-relay.ts). */
export interface Deliverer {
  deliver(ids: TaskIds, request: TaskRequestRecord, ctx: DeliveryContext, turn?: number): Promise<A2AState>;
}

/** A turn's first attempt, as the process that took the task begins it. */
export interface FirstAttempt {
  ids: TaskIds;
  request: TaskRequestRecord;
  turn: number;
  callTimeoutMs: number;
  /** Bounds the attempt together with {@link firstAttemptTimeoutMs}: the task's deadline, from now. */
  timeoutMs: number;
  /** The task has push configs: the attempt answers after its first change, as the workflow's would. */
  returnOnChange: boolean;
  /** The task as the gateway wrote it, and its agent as it read it: the attempt reads neither again. */
  task: StoredTask;
  agent: StoredAgent;
}

interface Held {
  controller: AbortController;
  outcome: Promise<A2AState>;
  endedAt?: number;
}

const keyOf = (taskId: string, turn: number, r: TaskRequestRecord) => `${taskId}.${turn}@${r.topic}#${r.partition}@${r.offset}`;

/**
 * The first delivery attempt of a task's turn, begun by the process that took the task as soon as the server has
 * started the task's workflow eagerly on this process's worker, and adopted by that workflow's first local
 * activity (activities/a2a-task.activities.ts) when it runs.
 *
 * Why: the workflow's first activation and the dispatch of its local activity take a few milliseconds of the
 * worker's time after the start call returns; the attempt does not wait for them. What is durable is the same as when
 * the activity begins it: the task's row, its request record and its workflow all exist before the attempt begins.
 * The workflow still owns the attempt: its local activity waits for the attempt's outcome and answers it (an error
 * too: the workflow retries as after any failed first attempt), and a cancel of the local activity aborts the attempt.
 * An attempt its local activity never adopts (the worker lost the workflow task, which then runs elsewhere) runs to
 * its end, bounded, and its change is a compare-and-set like any other: a delivery elsewhere finds the turn sent and
 * follows the agent's task, or, if it began before this attempt recorded the send, sends it again (at least once, as
 * any delivery tried again).
 */
export class FirstAttempts {
  private readonly held = new Map<string, Held>();
  /** Attempts begun, adopted by their local activity, and not begun because too many were held (`/health`). */
  private readonly counts = { begun: 0, adopted: 0, refused: 0 };

  constructor(
    private readonly relay: Deliverer,
    /** Aborted when the instance shuts down: an attempt stops at once, as its local activity would. */
    private readonly shutdown: AbortSignal,
  ) {}

  /** Begins the attempt (once per task, turn and request). */
  begin(attempt: FirstAttempt): void {
    const key = keyOf(attempt.ids.taskId, attempt.turn, attempt.request);
    if (this.held.has(key) || this.shutdown.aborted) return;
    if (!this.makeRoom()) {
      this.counts.refused++;
      return;
    }
    const controller = new AbortController();
    const bound = Math.max(1, Math.min(attempt.timeoutMs, firstAttemptTimeoutMs(attempt.callTimeoutMs)));
    const signal = AbortSignal.any([controller.signal, this.shutdown, AbortSignal.timeout(bound)]);
    const outcome = this.relay.deliver(
      attempt.ids,
      attempt.request,
      { signal, callTimeoutMs: attempt.callTimeoutMs, returnOnChange: attempt.returnOnChange, known: { task: attempt.task, agent: attempt.agent } },
      attempt.turn,
    );
    const entry: Held = { controller, outcome };
    this.held.set(key, entry);
    this.counts.begun++;
    const ended = () => {
      entry.endedAt = Date.now();
      // Not adopted within the TTL: dropped (a local activity after that delivers itself, reading the task as recorded).
      setTimeout(() => this.held.get(key) === entry && this.held.delete(key), ENDED_TTL_MS).unref();
    };
    outcome.then(ended, ended);
  }

  /**
   * The outcome of the attempt begun for this turn and request, once (undefined if none was begun here, or it was
   * dropped): the local activity answers it. `signal` (the local activity's cancel) aborts the attempt.
   */
  adopt(taskId: string, turn: number, request: TaskRequestRecord, signal: AbortSignal): Promise<A2AState> | undefined {
    const key = keyOf(taskId, turn, request);
    const entry = this.held.get(key);
    if (!entry) return undefined;
    this.held.delete(key);
    this.counts.adopted++;
    if (entry.endedAt === undefined) {
      const abort = () => entry.controller.abort(signal.reason);
      if (signal.aborted) abort();
      else {
        signal.addEventListener('abort', abort, { once: true });
        const forget = () => signal.removeEventListener('abort', abort);
        entry.outcome.then(forget, forget);
      }
    }
    return entry.outcome;
  }

  stats(): { begun: number; adopted: number; refused: number; held: number } {
    return { ...this.counts, held: this.held.size };
  }

  /** Whether another attempt may be held: ended ones go, oldest first, to make room; running ones stay. */
  private makeRoom(): boolean {
    if (this.held.size < MAX_HELD) return true;
    for (const [key, entry] of this.held) {
      if (entry.endedAt !== undefined) {
        this.held.delete(key);
        return true;
      }
    }
    return false;
  }
}

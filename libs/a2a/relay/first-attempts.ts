import type { EventFrame } from '@libs/frame';
import { firstAttemptTimeoutMs, type TaskIds, type TaskRequestRecord } from '../../../contracts';
import type { StoredAgent } from '../agents/agent-store';
import type { A2AState } from '../tasks/task-states';
import type { DeliveryContext } from './task-relay';
import type { StoredTask } from '../tasks/task-store';

/** How long an attempt that ended waits to be adopted by its local activity before it is dropped. */
const ENDED_TTL_MS = 10_000;
/** How long a local activity waits for an expected attempt to begin (the gateway begins or withdraws it sooner). */
const EXPECTED_TTL_MS = 10_000;
/** Most attempts held at once (expected, running or ended); past it, the oldest ended one goes first, and no new one is held. */
const MAX_HELD = 1000;

/** What delivers: the task relay (task-relay.ts). */
export interface Deliverer {
  deliver(ids: TaskIds, request: TaskRequestRecord | undefined, ctx: DeliveryContext, turn?: number): Promise<A2AState>;
}

/** A turn's first attempt, as the process that took the task begins it. */
export interface FirstAttempt {
  ids: TaskIds;
  turn: number;
  /** Where the turn's request is in Kafka, when the workflow's input names it (else the task's row does). */
  request?: TaskRequestRecord;
  /** The request as the gateway wrote it to Kafka: the attempt sends it without reading it back. */
  frame: EventFrame;
  callTimeoutMs: number;
  /** Bounds the attempt together with {@link firstAttemptTimeoutMs}: the task's deadline, from now. */
  timeoutMs: number;
  /** The task as the gateway wrote it, and its agent as it read it: the attempt reads neither again. */
  task: StoredTask;
  agent: StoredAgent;
}

/** An attempt begun: its outcome (wrapped, so that resolving `begun` with it does not wait for it). */
interface Begun {
  outcome: Promise<A2AState>;
}

interface Held {
  /** Settles when the gateway began the attempt or withdrew it (undefined: the local activity delivers). */
  begun: Promise<Begun | undefined>;
  settle: (begun: Begun | undefined) => void;
  started: boolean;
  controller: AbortController;
  endedAt?: number;
}

const keyOf = (taskId: string, turn: number) => `${taskId}.${turn}`;

/**
 * The first delivery attempt of a task's turn, begun by the process that took the task as soon as the server has
 * started the task's workflow eagerly on this process's worker and the task is written, and adopted by that
 * workflow's first local activity (activities/a2a-task.activities.ts) when it runs.
 *
 * Why: the workflow's first activation and the dispatch of its local activity take several milliseconds of the
 * worker's time after the start call returns; the attempt does not wait for them. What is durable is the same as
 * when the activity begins it: the task's row, its request record and its workflow all exist before the attempt
 * begins. The workflow still owns the attempt: its local activity waits for the attempt's outcome and answers it (an
 * error too: the workflow retries as after any failed first attempt), and a cancel of the local activity aborts it.
 *
 * The gateway announces the attempt before it starts the workflow ({@link expect}), and then begins or withdraws it:
 * a local activity that runs in between waits for that, so it neither sends the turn beside the attempt nor reads a
 * task row still being written. An attempt its local activity never adopts (the worker lost the workflow task,
 * which then runs elsewhere) runs to its end, bounded, and its change is a compare-and-set like any other: a delivery
 * elsewhere finds the turn sent and follows the agent's task, or, if it read the task before this attempt recorded
 * the send, sends it again (at least once, as any delivery tried again).
 */
export class FirstAttempts {
  private readonly held = new Map<string, Held>();
  /** Attempts begun, adopted by their local activity, and not held because too many were (`/health`). */
  private readonly counts = { begun: 0, adopted: 0, refused: 0 };

  constructor(
    private readonly relay: Deliverer,
    /** Aborted when the instance shuts down: an attempt stops at once, as its local activity would. */
    private readonly shutdown: AbortSignal,
  ) {}

  /**
   * The gateway will begin (or withdraw) this turn's attempt: a local activity of the turn waits for it. False when
   * it cannot be held (too many, or shutting down): the gateway then begins none, and the local activity delivers.
   */
  expect(taskId: string, turn: number): boolean {
    const key = keyOf(taskId, turn);
    if (this.held.has(key)) return false;
    if (this.shutdown.aborted || !this.makeRoom()) {
      this.counts.refused++;
      return false;
    }
    let settle!: Held['settle'];
    const begun = new Promise<Begun | undefined>((resolve) => (settle = resolve));
    const entry: Held = { begun, settle, started: false, controller: new AbortController() };
    this.held.set(key, entry);
    // Neither begun nor withdrawn in time (a bug of the caller's): the local activity delivers.
    const expiry = setTimeout(() => this.withdraw(taskId, turn), EXPECTED_TTL_MS);
    expiry.unref();
    void begun.then(() => clearTimeout(expiry));
    return true;
  }

  /** Begins the attempt the gateway announced with {@link expect}. */
  begin(attempt: FirstAttempt): void {
    const key = keyOf(attempt.ids.taskId, attempt.turn);
    const entry = this.held.get(key);
    if (!entry || entry.started) return;
    if (this.shutdown.aborted || entry.controller.signal.aborted) {
      // Shutting down, or its local activity was canceled while it waited for this: nothing is sent.
      this.withdraw(attempt.ids.taskId, attempt.turn);
      return;
    }
    const bound = Math.max(1, Math.min(attempt.timeoutMs, firstAttemptTimeoutMs(attempt.callTimeoutMs)));
    const signal = AbortSignal.any([entry.controller.signal, this.shutdown, AbortSignal.timeout(bound)]);
    const known = { task: attempt.task, agent: attempt.agent, frame: attempt.frame };
    const outcome = this.relay.deliver(
      attempt.ids,
      attempt.request,
      { signal, callTimeoutMs: attempt.callTimeoutMs, known },
      attempt.turn,
    );
    this.counts.begun++;
    entry.started = true;
    entry.settle({ outcome });
    const ended = () => {
      entry.endedAt = Date.now();
      // Not adopted within the TTL: dropped (a local activity after that delivers itself, reading the task as recorded).
      setTimeout(() => this.held.get(key) === entry && this.held.delete(key), ENDED_TTL_MS).unref();
    };
    outcome.then(ended, ended);
  }

  /** The gateway will not begin the attempt (it could not take the task, or the workflow did not start here). */
  withdraw(taskId: string, turn: number): void {
    const key = keyOf(taskId, turn);
    const entry = this.held.get(key);
    if (!entry) return;
    this.held.delete(key);
    entry.settle(undefined);
  }

  /**
   * A turn's first local activity: the attempt the gateway announced for it, once (waiting for it to begin), or,
   * with none, `deliver` itself. `signal` (the local activity's cancel) aborts the attempt.
   */
  async run(taskId: string, turn: number, signal: AbortSignal, deliver: () => Promise<A2AState>): Promise<A2AState> {
    const key = keyOf(taskId, turn);
    const entry = this.held.get(key);
    if (!entry) return deliver();
    let canceled!: (reason: unknown) => void;
    const canceledWhileWaiting = new Promise<never>((_, reject) => (canceled = reject));
    canceledWhileWaiting.catch(() => undefined);
    const abort = () => {
      entry.controller.abort(signal.reason);
      canceled(signal.reason);
    };
    signal.addEventListener('abort', abort, { once: true });
    try {
      if (signal.aborted) abort();
      const begun = await Promise.race([entry.begun, canceledWhileWaiting]);
      if (!begun) return await deliver();
      if (this.held.get(key) === entry) this.held.delete(key);
      this.counts.adopted++;
      return await begun.outcome;
    } finally {
      signal.removeEventListener('abort', abort);
    }
  }

  stats(): { begun: number; adopted: number; refused: number; held: number } {
    return { ...this.counts, held: this.held.size };
  }

  /** Whether another attempt may be held: ended ones go, oldest first, to make room; the others stay. */
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

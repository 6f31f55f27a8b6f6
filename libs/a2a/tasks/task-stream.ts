import { StreamResponse, taskStateFromJSON } from '@a2a-js/sdk';
import type { ServerCallContext } from '@a2a-js/sdk/server';
import type { DataSource } from 'typeorm';
import { createLogger } from '@libs/logging';
import { A2ATaskRows } from '@libs/storage';
import { readEvents, TaskEvent } from './task-events';
import { A2AState, SETTLED, stateOf } from './task-states';

const log = createLogger('A2AStreams');

/** Events read from a log at once; a stream behind by more reads again at once. */
const BATCH = 100;

/**
 * What a route and the request handler share about one stream, in the SDK's `ServerCallContext.state`: the route
 * puts the client's `Last-Event-ID` and the stream's abort signal there; the handler puts the seq of the event it
 * yields (the SDK's transport handlers wrap each event one for one, so the route reads it as it writes the event).
 */
export const STREAM_STATE = {
  lastEventId: 'eventmesh.a2a.lastEventId',
  signal: 'eventmesh.a2a.signal',
  seq: 'eventmesh.a2a.seq',
} as const;

/** The seq of the event the handler yielded last on this call's stream. */
export function streamSeqOf(context: ServerCallContext): number | undefined {
  const seq = context.state.get(STREAM_STATE.seq);
  return typeof seq === 'number' ? seq : undefined;
}

/** An SSE `Last-Event-ID` as a seq: a non-negative integer, or undefined (absent); anything else is `null` (refused). */
export function parseLastEventId(raw: string | undefined): number | undefined | null {
  if (raw === undefined || raw.trim() === '') return undefined;
  return /^\d{1,9}$/.test(raw.trim()) ? Number(raw.trim()) : null;
}

/** The state an event leaves its task in (a snapshot's or a status update's), if it says. */
export function stateOfEvent(event: TaskEvent): A2AState | undefined {
  if (event.kind === 'artifact-update') return undefined;
  const status = event.payload.status as { state?: string } | undefined;
  return status?.state === undefined ? undefined : stateOf(taskStateFromJSON(status.state));
}

/** The event as the SDK's `StreamResponse`, which its transport handlers encode for JSON-RPC (v1.0, v0.3) and REST. */
export function streamResponseOf(event: TaskEvent): StreamResponse {
  switch (event.kind) {
    case 'task':
      return StreamResponse.fromJSON({ task: event.payload });
    case 'status-update':
      return StreamResponse.fromJSON({ statusUpdate: event.payload });
    default:
      return StreamResponse.fromJSON({ artifactUpdate: event.payload });
  }
}

interface Waiter {
  after: number;
  wake(more: boolean): void;
}

export interface TaskStreamOptions {
  /** How often the logs streams wait on are looked at (EVENTMESH_AGENTS_STREAM_POLL_MS). */
  pollMs: number;
  /** Most streams open at once in this process (EVENTMESH_AGENTS_MAX_STREAMS). */
  maxStreams: number;
}

/**
 * The SSE streams of task logs of one gateway process (docs/a2a.md, "Streaming"). A stream reads its task's log
 * from Postgres (task-events.ts), so any instance streams any task, whichever took it. Streams that caught up wait
 * here: one query per tick (`EVENTMESH_AGENTS_STREAM_POLL_MS`) looks at the last seq of every task waited on, and
 * wakes the streams whose task moved on; nothing runs while no stream waits. At most `maxStreams` are open; a
 * stream's abort signal (the client went away, or the gateway closes) ends its wait at once.
 */
export class TaskStreams {
  private readonly waiting = new Map<string, Set<Waiter>>();
  private readonly open = new Set<AbortController>();
  private timer?: NodeJS.Timeout;
  /** Whether the last look failed (Postgres unavailable): logged once when it starts, once when it ends. */
  private failing = false;

  private readonly tasks: A2ATaskRows;

  constructor(
    private readonly db: DataSource,
    private readonly options: TaskStreamOptions,
  ) {
    this.tasks = new A2ATaskRows(db);
  }

  /** Streams open now. */
  get size(): number {
    return this.open.size;
  }

  get maxStreams(): number {
    return this.options.maxStreams;
  }

  /** Streams open, streams waiting for their task's next event, and the cap (/health). */
  stats(): { open: number; waiting: number; maxStreams: number } {
    let waiting = 0;
    for (const waiters of this.waiting.values()) waiting += waiters.size;
    return { open: this.open.size, waiting, maxStreams: this.options.maxStreams };
  }

  /**
   * Opens a stream: its abort controller, aborted when the gateway closes; `release` when it ended. Undefined when
   * `maxStreams` are open (the route refuses it).
   */
  acquire(): { signal: AbortSignal; abort(): void; release(): void } | undefined {
    if (this.open.size >= this.options.maxStreams) return undefined;
    const controller = new AbortController();
    this.open.add(controller);
    return { signal: controller.signal, abort: () => controller.abort(), release: () => this.open.delete(controller) };
  }

  /**
   * The task's events after `afterSeq`, oldest first, as they are appended; ends after the event that leaves the task
   * in a state where streams end (terminal, or interrupted), or when `signal` aborts. Exactly the log: nothing skipped,
   * nothing twice.
   */
  async *events(taskId: string, afterSeq: number, signal: AbortSignal): AsyncGenerator<TaskEvent, void, undefined> {
    let cursor = afterSeq;
    while (!signal.aborted) {
      const events = await readEvents(this.db, taskId, cursor, BATCH);
      for (const event of events) {
        if (signal.aborted) return;
        cursor = event.seq;
        yield event;
        const state = stateOfEvent(event);
        if (state && SETTLED.has(state)) return;
      }
      if (events.length === BATCH) continue;
      if (!(await this.waitFor(taskId, cursor, signal))) return;
    }
  }

  /** Resolves true once the task's log has an event after `after`; false when `signal` aborts first. */
  private waitFor(taskId: string, after: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const waiters = this.waiting.get(taskId) ?? new Set<Waiter>();
      const onAbort = () => waiter.wake(false);
      const waiter: Waiter = {
        after,
        wake: (more) => {
          signal.removeEventListener('abort', onAbort);
          waiters.delete(waiter);
          if (waiters.size === 0 && this.waiting.get(taskId) === waiters) this.waiting.delete(taskId);
          resolve(more);
        },
      };
      waiters.add(waiter);
      this.waiting.set(taskId, waiters);
      signal.addEventListener('abort', onAbort, { once: true });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.timer || this.waiting.size === 0) return;
    this.timer = setTimeout(() => void this.tick(), this.options.pollMs);
    this.timer.unref();
  }

  /** One look at the tasks waited on: wakes each waiter whose task's last seq is past its cursor. */
  private async tick(): Promise<void> {
    try {
      const ids = [...this.waiting.keys()];
      if (ids.length === 0) return;
      const rows = await this.tasks.eventSeqs(ids);
      if (this.failing) log.info('the task logs streams wait on can be looked at again');
      this.failing = false;
      for (const row of rows) {
        for (const waiter of [...(this.waiting.get(row.id) ?? [])]) if (row.event_seq > waiter.after) waiter.wake(true);
      }
    } catch (e) {
      // Postgres unavailable: the streams stay open and the next tick looks again.
      if (!this.failing)
        log.warn(
          { error: (e as Error).message },
          'could not look at the task logs streams wait on; trying again every tick',
        );
      this.failing = true;
    } finally {
      this.timer = undefined;
      this.schedule();
    }
  }

  /** Ends every stream (the gateway closes): each sees its signal aborted. */
  close(): void {
    for (const controller of this.open) controller.abort();
    this.open.clear();
    for (const waiters of [...this.waiting.values()]) for (const waiter of [...waiters]) waiter.wake(false);
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

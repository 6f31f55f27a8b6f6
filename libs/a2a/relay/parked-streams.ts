import type { Task } from '@a2a-js/sdk';
import type { AgentStream } from './agent-stream';

/** An agent's stream of a task left open by the delivery that read it, for the next delivery to read on. */
export interface ParkedStream {
  live: AgentStream;
  /** The agent's task as the stream had told it so far (its later events apply to it). */
  snapshot: Task | undefined;
}

/** How long a parked stream waits for the delivery that follows; then it is closed (that delivery subscribes again). */
export const PARKED_STREAM_TTL_MS = 10_000;

/**
 * The streams of agents that stream, handed from a task's first attempt to the delivery that follows it on the same
 * worker (task-relay.ts). A first attempt follows the agent's task for a moment and answers its workflow; the stream
 * it read is left open here, its next read pending, so the delivery after it (scheduled on this worker by eager
 * activity dispatch, usually) reads on where it stopped: nothing the agent sends in between is missed, and the agent
 * is not asked to subscribe again. A delivery on another worker finds nothing here and subscribes; the stream left
 * here is closed after {@link PARKED_STREAM_TTL_MS}, or when the worker shuts down.
 */
export class ParkedStreams {
  private readonly held = new Map<string, { stream: ParkedStream; timer: NodeJS.Timeout; lifetime: AbortController }>();
  private readonly counts = { parked: 0, taken: 0, expired: 0 };

  constructor(private readonly options: { ttlMs?: number; shutdown?: AbortSignal } = {}) {
    options.shutdown?.addEventListener('abort', () => this.closeAll(), { once: true });
  }

  /** Leaves the stream of the task's turn here (one per turn: an older one is closed). */
  park(taskId: string, turn: number, stream: ParkedStream): void {
    const key = keyOf(taskId, turn);
    const earlier = this.held.get(key);
    if (earlier) {
      this.held.delete(key);
      clearTimeout(earlier.timer);
      earlier.lifetime.abort();
    }
    if (this.options.shutdown?.aborted) return stream.live.close();
    // Its own lifetime from now on: not the cancel of the delivery that left it.
    const lifetime = new AbortController();
    stream.live.adopt(lifetime.signal);
    const timer = setTimeout(() => {
      if (this.held.get(key)?.stream !== stream) return;
      this.held.delete(key);
      this.counts.expired++;
      lifetime.abort();
    }, this.options.ttlMs ?? PARKED_STREAM_TTL_MS);
    timer.unref();
    this.held.set(key, { stream, timer, lifetime });
    this.counts.parked++;
  }

  /** The stream left for the task's turn, if one is (the caller adopts it with its own cancel). */
  take(taskId: string, turn: number): ParkedStream | undefined {
    const key = keyOf(taskId, turn);
    const entry = this.held.get(key);
    if (!entry) return undefined;
    this.held.delete(key);
    clearTimeout(entry.timer);
    if (entry.stream.live.closed) return undefined;
    this.counts.taken++;
    return entry.stream;
  }

  /** Whether `live` is the stream left here for the task's turn (its reader must not close it). */
  holds(taskId: string, turn: number, live: AgentStream | undefined): boolean {
    return live !== undefined && this.held.get(keyOf(taskId, turn))?.stream.live === live;
  }

  stats(): { held: number; parked: number; taken: number; expired: number } {
    return { held: this.held.size, ...this.counts };
  }

  private closeAll(): void {
    for (const entry of this.held.values()) {
      clearTimeout(entry.timer);
      entry.lifetime.abort();
    }
    this.held.clear();
  }
}

const keyOf = (taskId: string, turn: number) => `${taskId}#${turn}`;

import type { RuntimeLimits } from './api-types';
import { EventMeshError } from './errors';
import type { HttpClient } from './http';

/** The largest publish request: events in it and bytes of its body. */
export interface BatchBounds {
  events: number;
  bytes: number;
}

/**
 * The batch bounds of automatic batching: the client's options, lowered to the largest publish the runtime says it
 * takes (`GET /limits`: its body and batch bounds and the tenant's burst), so a batch is split before the runtime
 * refuses it whole. Read once, on the first publish, and kept; read again after a refusal for size (an operator
 * lowered a bound, or the tenant's quota changed). A runtime that does not answer it leaves the options alone.
 */
export class PublishLimits {
  private known?: BatchBounds;
  private reading?: Promise<BatchBounds>;

  constructor(
    private readonly http: HttpClient,
    private readonly configured: BatchBounds,
  ) {}

  /** The bounds once read; undefined before the first read ends (a publish then awaits `read`). */
  get current(): BatchBounds | undefined {
    return this.known;
  }

  /** The bounds, read from the runtime by the first call only. */
  read(): Promise<BatchBounds> {
    return (this.reading ??= this.fetch().then((bounds) => (this.known = bounds)));
  }

  /** Reads the bounds again (the old ones stay `current` until then). */
  refresh(): Promise<BatchBounds> {
    this.reading = undefined;
    return this.read();
  }

  private async fetch(): Promise<BatchBounds> {
    try {
      const answer = await this.http.send({
        method: 'GET',
        path: '/limits',
        idempotent: true,
        timeoutMs: this.http.attemptTimeoutMs,
      });
      const { maxPublish } = JSON.parse(answer.text) as Partial<RuntimeLimits>;
      if (typeof maxPublish?.events !== 'number' || typeof maxPublish.bytes !== 'number') return this.configured;
      return {
        events: Math.max(1, Math.min(this.configured.events, maxPublish.events)),
        bytes: Math.min(this.configured.bytes, maxPublish.bytes),
      };
    } catch {
      // An older runtime (404), or none reachable: the publish itself then says what is wrong.
      return this.configured;
    }
  }
}

/**
 * A refusal of a request for its size, which a smaller one would pass: 413 (`PAYLOAD_TOO_LARGE`,
 * `BATCH_EXCEEDS_BURST`) or the 400 of a batch over the runtime's event count (its `limit`, no event `index`).
 */
export function isSizeRefusal(e: unknown): boolean {
  if (!(e instanceof EventMeshError)) return false;
  return e.status === 413 || (e.status === 400 && typeof e.body.limit === 'number' && e.body.index === undefined);
}

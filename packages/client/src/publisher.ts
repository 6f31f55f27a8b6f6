import { ValidationError } from './errors';
import { FlowControl } from './flow-control';
import type { HttpClient } from './http';
import { isSizeRefusal, PublishLimits, type BatchBounds } from './publish-limits';
import type { BatchPublishAnswer, PublishResult } from './api-types';
import type { PublishOptions } from './options';
import { notNegative, optionsOf, positive, positiveInteger } from './retry';

/** Per-call options of `publish` and `publishMany`. */
export interface PublishCallOptions {
  /** The topic (default: the client's `topic`, else the runtime's first). */
  topic?: string;
  /** A W3C `traceparent` (and `tracestate`) put into every event of the call that has no `traceparent` of its own. */
  traceparent?: string;
  tracestate?: string;
}

/** A `publishMany` call's options. */
export interface PublishManyOptions extends PublishCallOptions {
  /**
   * Written in the order given: the call's events go out in requests of their own (never shared with other
   * publishes), one at a time, each sent once the one before was answered. Without it, the requests a long call
   * is cut into, and those it shares with other callers, are in flight together and may be written in any order
   * between them. A request refused for its size fails the call (the events are not cut again and sent side by side).
   */
  ordered?: boolean;
}

export const PUBLISH_DEFAULTS: Required<PublishOptions> = {
  maxEventsInFlight: 1000,
  maxBytesInFlight: 16 * 1024 * 1024,
  lingerMs: 0,
  maxBatchEvents: 500,
  maxBatchBytes: 512 * 1024,
};

/** A queued event's caller: answered (and its room in flight given back) when its request is. */
interface Pending {
  bytes: number;
  resolve: (r: PublishResult) => void;
  reject: (e: unknown) => void;
}

interface Lane {
  call: PublishCallOptions;
  /** The events' JSON, UTF-8 encoded, until the lane is flushed into one request body. */
  chunks: Buffer[];
  items: Pending[];
  /** The bytes of the lane's body: its events', a comma between two, and the brackets. */
  bytes: number;
  timer?: NodeJS.Timeout | NodeJS.Immediate;
}

/**
 * Automatic batching: publishes of one topic (and trace context) that come within `lingerMs` of each other share
 * one HTTP request, cut at `maxBatchEvents` and `maxBatchBytes`, lowered to what the runtime takes (`GET /limits`,
 * see PublishLimits). One event goes in the structured mode, more in the batch mode; each caller gets its own
 * event's result. The runtime's batch is all or nothing, so a retry resends the whole request with the same ids. A
 * 400 naming one event's `index` fails that event only: the others are sent again without it. A batch refused for
 * its size is split to the bounds read again, when they are smaller than it.
 */
export class Publisher {
  private readonly options: Required<PublishOptions>;
  private readonly flow: FlowControl;
  private readonly lanes = new Map<string, Lane>();
  private readonly limits: PublishLimits;
  /** The calls not yet ended and the requests not yet answered: what `drain` waits for. */
  private readonly active = new Set<Promise<unknown>>();
  /** Set by `drain`: a lane is sent at once, not after `lingerMs`. */
  private draining = false;

  constructor(
    private readonly http: HttpClient,
    options: PublishOptions = {},
    private readonly defaultTopic?: string,
  ) {
    // An option given as undefined keeps its default (a spread let it through: NaN bounds, batches never cut).
    this.options = optionsOf('publish', PUBLISH_DEFAULTS, options, {
      maxEventsInFlight: positiveInteger,
      maxBytesInFlight: positive,
      lingerMs: (v) => notNegative(v) && v <= 2 ** 31 - 1,
      maxBatchEvents: positiveInteger,
      maxBatchBytes: positive,
    });
    this.flow = new FlowControl(this.options.maxEventsInFlight, this.options.maxBytesInFlight);
    this.limits = new PublishLimits(http, { events: this.options.maxBatchEvents, bytes: this.options.maxBatchBytes });
  }

  /** Events and bytes published and not yet answered. */
  get inFlight(): { events: number; bytes: number } {
    return this.flow.inFlight;
  }

  /**
   * Sends the events lingering in lanes now and resolves once every publish made before it (and any made meanwhile)
   * is answered, each request within its attempts' timeouts.
   */
  async drain(): Promise<void> {
    this.draining = true;
    for (;;) {
      for (const [key, lane] of [...this.lanes]) this.flush(key, lane);
      if (this.active.size === 0) break;
      await Promise.allSettled([...this.active]);
    }
    this.draining = false;
  }

  /** Keeps `promise` in `active` until it settles; returns it. */
  private track<T>(promise: Promise<T>): Promise<T> {
    this.active.add(promise);
    const done = () => this.active.delete(promise);
    promise.then(done, done);
    return promise;
  }

  /** Waits for room in flight, then queues the event (JSON text) for the next request of its lane. */
  publish(json: string, call: PublishCallOptions = {}): Promise<PublishResult> {
    return this.track(this.publishOne(json, call));
  }

  private async publishOne(json: string, call: PublishCallOptions): Promise<PublishResult> {
    const chunk = Buffer.from(json);
    await this.flow.acquire(1, chunk.length);
    if (!this.limits.current) await this.limits.read();
    return new Promise<PublishResult>((resolve, reject) =>
      this.enqueue(chunk, { bytes: chunk.length, resolve, reject }, call),
    );
  }

  /**
   * Publishes `events` in order, each turned into JSON text (`toJson`) only once there is room in flight for it: a
   * long list is never held as JSON all at once, and each request's events are serialized just before it is sent,
   * as a hand-written batch loop does. Resolves with each event's result, in order; rejects with the first failure.
   * Each event's answer is a callback writing its slot, not a promise: a long list makes no promise per event.
   */
  publishMany<E>(
    events: Iterable<E>,
    toJson: (event: E) => string,
    options: PublishManyOptions = {},
  ): Promise<PublishResult[]> {
    return this.track(this.publishAll(events, toJson, options));
  }

  private async publishAll<E>(
    events: Iterable<E>,
    toJson: (event: E) => string,
    options: PublishManyOptions,
  ): Promise<PublishResult[]> {
    const { ordered, ...call } = options;
    if (!this.limits.current) await this.limits.read();
    if (ordered) return this.publishInOrder(events, toJson, call);
    const results: PublishResult[] = [];
    return new Promise<PublishResult[]>((resolve, reject) => {
      // The events taken and not yet answered, and the loop itself until it has taken the last.
      let unanswered = 1;
      const answered = () => --unanswered === 0 && resolve(results);
      const take = async () => {
        let at = 0;
        for (const event of events) {
          const slot = at++;
          const chunk = Buffer.from(toJson(event));
          if (!this.flow.tryAcquire(1, chunk.length)) await this.flow.acquire(1, chunk.length);
          unanswered++;
          const answer = (r: PublishResult) => {
            results[slot] = r;
            answered();
          };
          this.enqueue(chunk, { bytes: chunk.length, resolve: answer, reject }, call);
        }
        answered();
      };
      this.track(take()).catch(reject);
    });
  }

  /**
   * `publishMany` with `ordered`: the events cut into requests at the batch bounds (and where the room in flight
   * ends), each request sent once the one before was answered; rejects with the first failure, sending nothing after.
   */
  private async publishInOrder<E>(
    events: Iterable<E>,
    toJson: (event: E) => string,
    call: PublishCallOptions,
  ): Promise<PublishResult[]> {
    const results: PublishResult[] = [];
    let chunks: Buffer[] = [];
    let bytes = 1;
    const sendTaken = async () => {
      const first = results.length;
      await new Promise<void>((resolve, reject) => {
        let left = chunks.length;
        const items = chunks.map((chunk, i): Pending => ({
          bytes: chunk.length,
          resolve: (r) => {
            results[first + i] = r;
            if (--left === 0) resolve();
          },
          reject,
        }));
        void this.track(this.send(bodyOf(chunks, bytes), items, call, false));
      });
      [chunks, bytes] = [[], 1];
    };
    for (const event of events) {
      const chunk = Buffer.from(toJson(event));
      const bounds = this.bounds;
      if (chunks.length > 0 && (chunks.length >= bounds.events || bytes + chunk.length + 1 > bounds.bytes))
        await sendTaken();
      // The events taken hold room in flight until their request is answered: send them before waiting for more.
      if (!this.flow.tryAcquire(1, chunk.length)) {
        if (chunks.length > 0) await sendTaken();
        await this.flow.acquire(1, chunk.length);
      }
      chunks.push(chunk);
      bytes += chunk.length + 1;
    }
    if (chunks.length > 0) await sendTaken();
    return results;
  }

  /** Queues an event whose room in flight is taken; the room is given back when it is answered. */
  private enqueue(chunk: Buffer, item: Pending, call: PublishCallOptions): void {
    const topic = call.topic ?? this.defaultTopic;
    const key = `${topic ?? ''}\n${call.traceparent ?? ''}\n${call.tracestate ?? ''}`;
    const bounds = this.bounds;
    let lane = this.lanes.get(key);
    if (lane && lane.bytes + item.bytes + 1 > bounds.bytes) {
      this.flush(key, lane);
      lane = undefined;
    }
    if (!lane) this.lanes.set(key, (lane = { call: { ...call, topic }, chunks: [], items: [], bytes: 1 }));
    lane.chunks.push(chunk);
    lane.items.push(item);
    lane.bytes += item.bytes + 1;
    if (lane.items.length >= bounds.events) this.flush(key, lane);
    else if (!lane.timer) {
      const open = lane;
      lane.timer =
        this.options.lingerMs > 0 && !this.draining
          ? setTimeout(() => this.flush(key, open), this.options.lingerMs)
          : setImmediate(() => this.flush(key, open));
    }
  }

  private get bounds(): BatchBounds {
    return this.limits.current ?? { events: this.options.maxBatchEvents, bytes: this.options.maxBatchBytes };
  }

  /**
   * Sends the lane's events as one request. The body is made here and the events' own buffers let go: a request in
   * flight holds one buffer, not one per event.
   */
  private flush(key: string, lane: Lane): void {
    if (lane.timer) {
      clearTimeout(lane.timer as NodeJS.Timeout);
      clearImmediate(lane.timer as NodeJS.Immediate);
    }
    this.lanes.delete(key);
    if (lane.items.length === 0) return;
    void this.track(this.send(bodyOf(lane.chunks, lane.bytes), lane.items, lane.call));
  }

  /**
   * `body`: one event's JSON text for one item, else the batch's JSON array, in the items' order. `shared` (a request
   * of automatic batching, not of an `ordered` call): a refusal for size cuts it again, a 400 naming one event sends
   * the others again; else the whole request fails, so nothing of an ordered call is written after a refused event.
   */
  private async send(body: Buffer, items: Pending[], call: PublishCallOptions, shared = true): Promise<void> {
    try {
      const results = await this.post(body, items.length > 1, call);
      items.forEach((item, i) => this.settle(item).resolve(results[i]));
    } catch (e) {
      if (items.length > 1 && isSizeRefusal(e)) {
        const bounds = await this.limits.refresh();
        if (shared && this.resplit(body, items, call, bounds)) return;
      }
      const index = e instanceof ValidationError ? e.body.index : undefined;
      if (shared && items.length > 1 && typeof index === 'number' && index >= 0 && index < items.length) {
        this.settle(items[index]).reject(e);
        // The others again, without it.
        const rest = chunksOf(body).filter((_, i) => i !== index);
        return this.send(
          bodyOf(rest),
          items.filter((_, i) => i !== index),
          call,
          shared,
        );
      }
      for (const item of items) this.settle(item).reject(e);
    }
  }

  /**
   * Queues a refused batch's events again, to be cut at `bounds`, when the batch is larger than those (else false:
   * it was within them, and a smaller cut is not known to pass). Each keeps its room in flight and its caller.
   */
  private resplit(body: Buffer, items: Pending[], call: PublishCallOptions, bounds: BatchBounds): boolean {
    if (items.length <= bounds.events && body.length <= bounds.bytes) return false;
    const chunks = chunksOf(body);
    items.forEach((item, i) => this.enqueue(chunks[i], item, call));
    return true;
  }

  /** Gives an answered event's room in flight back. */
  private settle(item: Pending): Pending {
    this.flow.release(1, item.bytes);
    return item;
  }

  private async post(body: Buffer, batch: boolean, call: PublishCallOptions): Promise<PublishResult[]> {
    const headers: Record<string, string> = {
      'content-type': batch ? 'application/cloudevents-batch+json' : 'application/cloudevents+json',
    };
    Object.assign(headers, traceHeaders(call));
    const answer = await this.http.send({
      method: 'POST',
      path: '/events/publish',
      query: { topic: call.topic },
      headers,
      body,
      idempotent: true,
      timeoutMs: this.http.attemptTimeoutMs,
    });
    const answered = JSON.parse(answer.text) as PublishResult | BatchPublishAnswer;
    return 'results' in answered ? answered.results : [answered];
  }
}

/**
 * A request's body: one event's JSON as it is, more as a JSON array (`bytes`: its length, when known). Copied into
 * one buffer, as `JSON.stringify` of an array writes one string: a string per event joined costs twice the CPU.
 */
function bodyOf(chunks: Buffer[], bytes = chunks.reduce((n, c) => n + c.length + 1, 1)): Buffer {
  if (chunks.length === 1) return chunks[0];
  const body = Buffer.allocUnsafe(bytes);
  body[0] = 0x5b; // '['
  let at = 1;
  chunks.forEach((chunk, i) => {
    if (i > 0) body[at++] = 0x2c; // ','
    at += chunk.copy(body, at);
  });
  body[at] = 0x5d; // ']'
  return body;
}

/** A batch body's events again, each its own JSON (read back from the body: a refusal is rare, a request in flight is not). */
function chunksOf(body: Buffer): Buffer[] {
  return (JSON.parse(body.toString()) as unknown[]).map((e) => Buffer.from(JSON.stringify(e)));
}

/** The W3C trace context headers of a call: the runtime puts them into each event without a `traceparent` of its own. */
export function traceHeaders(call: PublishCallOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  if (call.traceparent) headers.traceparent = call.traceparent;
  if (call.tracestate) headers.tracestate = call.tracestate;
  return headers;
}

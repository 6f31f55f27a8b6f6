import type { CloudEvent } from 'cloudevents';
import type { DedupeStore } from './dedupe/dedupe-store';
import type { RetryOptions } from './retry';

/** How a stream consumer reaches its deliveries. */
export type Transport = 'websocket' | 'sse' | 'long-poll';

/** `connecting` (first time), `connected`, `reconnecting` (after a drop, waiting for its backoff), `draining`, `closed`. */
export type ConsumerState = 'connecting' | 'connected' | 'reconnecting' | 'draining' | 'closed';

/** One state change: the transport in use and, for a drop or a fatal refusal, why. */
export interface StateChange {
  state: ConsumerState;
  transport?: Transport;
  error?: Error;
}

/** What the handler learns beside its event. */
export interface HandlerContext {
  /** The runtime's id of this delivery (a redelivery has another). */
  deliveryId: string;
  transport: Transport;
}

/** A consumer's handler: resolving acks the event, throwing nacks it (retried later), throwing `RejectError` dead-letters it. */
export type Handler = (event: CloudEvent<unknown>, ctx: HandlerContext) => Promise<void> | void;

/** One event of a batch handler's batch, with its delivery. */
export interface BatchItem extends HandlerContext {
  event: CloudEvent<unknown>;
}

/**
 * A batch handler's answer for one event of its batch: `'ack'`; `{ nack: true, delayMs? }`, delivered again after
 * `delayMs` (default the consumer's `nackDelayMs`); `{ reject: reason }`, to the subscription's dead letters.
 */
export type BatchOutcome = 'ack' | { nack: true; delayMs?: number } | { reject: string };

/**
 * A consumer's batch handler: the deliveries that arrived together (up to `maxBatchEvents`), one batch at a time.
 * Resolving with nothing acks every event; resolving with a list answers each event by its index (the list as long
 * as the batch); throwing nacks every event, throwing `RejectError` dead-letters every event.
 */
export type BatchHandler = (batch: BatchItem[]) => Promise<BatchOutcome[] | void> | BatchOutcome[] | void;

export interface BatchConsumeOptions extends Omit<ConsumeOptions, 'concurrency'> {
  /** Events in one batch, at most (default: `window`). */
  maxBatchEvents?: number;
}

/** One delivery as the async iterator yields it: the caller answers it. */
export interface Delivery extends HandlerContext {
  event: CloudEvent<unknown>;
  /** Settles the event (and records it in the dedupe store). */
  ack(): Promise<void>;
  /** A failed attempt: the runtime delivers it again after `delayMs` (default: the consumer's `nackDelayMs`). */
  nack(delayMs?: number): Promise<void>;
  /** Sends it to the subscription's dead letters. */
  reject(reason?: string): Promise<void>;
}

export interface ConsumeOptions {
  /** Default: WebSocket, falling back to SSE when the upgrade is refused, and to long-poll when SSE is. */
  transport?: Transport;
  /** Deliveries held unanswered at once, at most (the runtime's `window`, default 10, at most 1000). */
  window?: number;
  /** Handlers running at once, at most (default: `window`). */
  concurrency?: number;
  /** Where handled events are remembered by (source, id); default a `MemoryDedupeStore`; `false` turns dedupe off. */
  dedupe?: DedupeStore | false;
  /** MULTICAST: this client's CESQL filter. */
  filter?: string;
  /**
   * WebSocket: ask for batched frames (`?frames=batch`): the deliveries of one turn of the runtime in one message,
   * and the answers of one turn here in one message. Fewer messages per event for a consumer that takes many at
   * once (the table sink's); each event waits for the others of its batch, so the default, `false`, keeps one
   * message per delivery, the lowest latency.
   */
  batchFrames?: boolean;
  /** Long-poll: the consumer name (default a fresh one per consumer). */
  consumerName?: string;
  /**
   * While a handler runs, its delivery's ack deadline is extended every third of this, to this long ahead, so a
   * handler slower than the subscription's ack timeout keeps its delivery (the runtime neither times it out nor
   * hands it to another client). Default: the subscription's `config.ackTimeoutMs` (30 000 when it has none), read
   * once when the consumer starts; `false`: never extended.
   */
  ackDeadlineMs?: number | false;
  /** The retry delay a `nack` asks for when the handler threw (default 1000 ms). */
  nackDelayMs?: number;
  /** Backoff of reconnects (attempts are unbounded; `maxAttempts` is ignored). Default 200 ms doubling to 10 s, jittered. */
  reconnect?: Omit<RetryOptions, 'maxAttempts'>;
}

/** Counters of one consumer. */
export interface ConsumerStats {
  /** Handler calls that succeeded. */
  handled: number;
  /** Deliveries of events already handled: acked without calling the handler. */
  duplicates: number;
  acked: number;
  nacked: number;
  rejected: number;
  /** Connections opened after the first. */
  reconnects: number;
  /**
   * Failures of the dedupe store: a `seen` that failed nacks the delivery (it comes again); a `record` that failed
   * after the handler succeeded still acks it. Each is emitted as `error` when the consumer has a listener.
   */
  errors: number;
}

/** A running stream consumer: a callback consumer runs by itself; without a handler, iterate it. */
export interface Consumer extends AsyncIterable<Delivery> {
  readonly stats: Readonly<ConsumerStats>;
  readonly state: ConsumerState;
  /** The transport in use (after a fallback, the one fallen back to). */
  readonly transport: Transport | undefined;
  /** Stops taking deliveries, waits for the running handlers and their answers, then closes. */
  drain(): Promise<void>;
  /** Closes now: deliveries not yet answered are given back by the runtime and delivered again. */
  close(): Promise<void>;
  on(event: 'state', listener: (change: StateChange) => void): this;
  /** A failure of the dedupe store (`stats.errors`); without a listener it is only counted. */
  on(event: 'error', listener: (error: Error) => void): this;
  off(event: 'state', listener: (change: StateChange) => void): this;
  off(event: 'error', listener: (error: Error) => void): this;
}

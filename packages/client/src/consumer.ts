import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { CloudEvent } from 'cloudevents';
import type {
  Consumer,
  ConsumerState,
  ConsumerStats,
  ConsumeOptions,
  Delivery,
  Handler,
  StateChange,
  Transport,
} from './consumer-types';
import { dedupeKey, type DedupeStore } from './dedupe/dedupe-store';
import { MemoryDedupeStore } from './dedupe/memory-dedupe-store';
import { RejectError } from './errors';
import { cloudEventOf } from './events';
import type { HttpClient } from './http';
import { backoffDelay } from './retry';
import { Semaphore } from './semaphore';
import {
  isFatal,
  TransportRefusedError,
  type Answer,
  type Connect,
  type Connection,
  type WireDelivery,
} from './transports/connection';
import { connectLongPoll } from './transports/long-poll';
import { connectSse } from './transports/sse';
import { connectWebSocket } from './transports/websocket';

const CONNECT: Record<Transport, Connect> = {
  websocket: connectWebSocket,
  sse: connectSse,
  'long-poll': connectLongPoll,
};
const FALLBACK_ORDER: Transport[] = ['websocket', 'sse', 'long-poll'];
const RECONNECT_DEFAULTS = { maxAttempts: Infinity, initialDelayMs: 200, maxDelayMs: 10000 };
/** A subscription's ack timeout when its config names none (the runtime's default). */
const DEFAULT_ACK_TIMEOUT_MS = 30_000;

/**
 * A stream subscription's consumer. It keeps one connection open (reconnecting after a drop with backoff and
 * jitter; falling back WebSocket -> SSE -> long-poll when a transport is refused and none was chosen), hands each
 * delivery to the handler, and answers after it: ack on success, nack on a throw, reject on `RejectError`.
 *
 * At least once, handled once in practice: deliveries unanswered when a connection drops come again (with new
 * delivery ids). The dedupe store remembers (source, id) only after the handler succeeded, so a redelivery of a
 * handled event is acked without calling the handler (counted in `stats.duplicates`), while one whose handler
 * failed is handled again. A redelivery that comes while the same event's handler still runs (a drop, or the
 * subscription's ack timeout passing) waits for that handler, then is acked as a duplicate or handled. While a
 * handler runs, its delivery's ack deadline is extended (`ackDeadlineMs`), so the ack timeout does not pass.
 */
export class StreamConsumer extends EventEmitter implements Consumer {
  readonly stats: ConsumerStats = { handled: 0, duplicates: 0, acked: 0, nacked: 0, rejected: 0, reconnects: 0 };
  state: ConsumerState = 'connecting';
  transport: Transport | undefined;
  private connection: Connection | undefined;
  private readonly dedupe: DedupeStore | undefined;
  private readonly slots: Semaphore;
  /** The work on each event, by dedupe key, while it runs: a redelivery of it waits for it. */
  private readonly running = new Map<string, Promise<void>>();
  private readonly tasks = new Set<Promise<void>>();
  private readonly ready: Delivery[] = [];
  private wakeIterator: (() => void) | undefined;
  private wakeRun: (() => void) | undefined;
  private draining = false;
  private stopped = false;
  private failure: Error | undefined;
  private readonly done: Promise<void>;
  private readonly window: number;
  private readonly consumerName: string;
  /** How far ahead a running handler's delivery is extended; undefined: not extended. */
  private ackDeadline: Promise<number | undefined>;

  constructor(
    private readonly http: HttpClient,
    private readonly subscriptionId: string,
    private readonly handler: Handler | undefined,
    private readonly options: ConsumeOptions,
    private readonly connect: Record<Transport, Connect> = CONNECT,
  ) {
    super();
    this.window = options.window ?? 10;
    this.slots = new Semaphore(options.concurrency ?? this.window);
    this.dedupe = options.dedupe === false ? undefined : (options.dedupe ?? new MemoryDedupeStore());
    this.consumerName = options.consumerName ?? `sdk-${randomUUID()}`;
    this.ackDeadline = this.ackDeadlineOf(options.ackDeadlineMs);
    this.done = this.run();
  }

  override on(event: 'state', listener: (change: StateChange) => void): this {
    return super.on(event, listener);
  }

  override off(event: 'state', listener: (change: StateChange) => void): this {
    return super.off(event, listener);
  }

  async drain(): Promise<void> {
    if (this.stopped) return this.done;
    this.draining = true;
    this.setState('draining');
    while (this.tasks.size > 0) await Promise.all([...this.tasks]);
    await this.close();
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.connection?.close();
    this.wakeRun?.();
    await this.done;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Delivery> {
    if (this.handler) throw new Error('this consumer has a handler: it is not iterated');
    for (;;) {
      const next = this.ready.shift();
      if (next) yield next;
      else if (this.stopped) {
        if (this.failure) throw this.failure;
        return;
      } else await new Promise<void>((r) => (this.wakeIterator = r));
    }
  }

  /** Connects, waits for the connection to end, and connects again, until closed or refused for good. */
  private async run(): Promise<void> {
    const order = this.options.transport ? [this.options.transport] : FALLBACK_ORDER;
    const backoff = { ...RECONNECT_DEFAULTS, ...this.options.reconnect };
    let next = 0;
    let retry = 0;
    let opened = false;
    while (!this.stopped) {
      let why: Error | undefined;
      try {
        const connection: Connection = await this.connect[order[next]]({
          http: this.http,
          subscriptionId: this.subscriptionId,
          window: this.window,
          filter: this.options.filter,
          consumerName: this.consumerName,
          batchFrames: this.options.batchFrames,
          onDelivery: (d) => this.take(connection, d),
        });
        if (this.stopped) {
          connection.close();
          break;
        }
        if (opened) this.stats.reconnects++;
        opened = true;
        retry = 0;
        this.connection = connection;
        this.transport = connection.transport;
        this.setState('connected');
        why = await connection.ended;
        this.connection = undefined;
      } catch (e) {
        if (e instanceof TransportRefusedError && next < order.length - 1) {
          next++;
          continue;
        }
        if (isFatal(e)) {
          this.failure = e as Error;
          this.stopped = true;
          break;
        }
        why = e as Error;
      }
      if (this.stopped) break;
      this.setState(opened ? 'reconnecting' : 'connecting', why);
      await new Promise<void>((r) => {
        this.wakeRun = r;
        setTimeout(r, backoffDelay(++retry, backoff));
      });
    }
    this.setState('closed', this.failure);
    this.wakeIterator?.();
  }

  /** A delivery came on `connection`. While draining it is left unanswered: closing gives it back. */
  private take(connection: Connection, wire: WireDelivery): void {
    if (this.draining || this.stopped) return;
    const event = cloudEventOf(wire.event);
    const task = this.handler
      ? this.inTurn(connection, wire.deliveryId, event)
      : this.offer(connection, wire.deliveryId, event);
    this.tasks.add(task);
    void task.finally(() => this.tasks.delete(task));
  }

  /** Handler mode: one event's work at a time; a redelivery waits for the running one, then sees its outcome. */
  private async inTurn(connection: Connection, deliveryId: string, event: CloudEvent<unknown>): Promise<void> {
    const key = dedupeKey(event.source, event.id);
    for (let prior = this.running.get(key); prior; prior = this.running.get(key)) await prior;
    const work = this.handle(connection, deliveryId, event);
    this.running.set(key, work);
    try {
      await work;
    } finally {
      if (this.running.get(key) === work) this.running.delete(key);
    }
  }

  private async handle(connection: Connection, deliveryId: string, event: CloudEvent<unknown>): Promise<void> {
    if (await this.isDuplicate(connection, deliveryId, event)) return;
    await this.slots.acquire();
    let outcome: Answer;
    const stopExtending = this.keepExtended(connection, deliveryId);
    try {
      await this.handler!(event, { deliveryId, transport: connection.transport });
      this.stats.handled++;
      await this.dedupe?.record(event.source, event.id);
      outcome = { deliveryId, action: 'ack' };
    } catch (e) {
      outcome =
        e instanceof RejectError
          ? { deliveryId, action: 'reject', reason: e.message }
          : { deliveryId, action: 'nack', delayMs: this.options.nackDelayMs ?? 1000 };
    } finally {
      stopExtending();
      this.slots.release();
    }
    await this.answer(connection, outcome);
  }

  /** The deadline to extend running deliveries to: the option, or the subscription's ack timeout (read once). */
  private async ackDeadlineOf(option: number | false | undefined): Promise<number | undefined> {
    if (option === false) return undefined;
    if (option !== undefined) return option;
    try {
      const answer = await this.http.send({
        method: 'GET',
        path: `/subscriptions/${encodeURIComponent(this.subscriptionId)}`,
        idempotent: true,
      });
      const config = (JSON.parse(answer.text) as { config?: { ackTimeoutMs?: unknown } }).config;
      return typeof config?.ackTimeoutMs === 'number' ? config.ackTimeoutMs : DEFAULT_ACK_TIMEOUT_MS;
    } catch {
      // Not readable (a credential allowed to subscribe but not to read it): the runtime's default.
      return DEFAULT_ACK_TIMEOUT_MS;
    }
  }

  /**
   * Extends the delivery every third of the deadline while its handler runs (from when the deadline is known: the
   * handler does not wait for it); answers what stops the extending when the handler ended.
   */
  private keepExtended(connection: Connection, deliveryId: string): () => void {
    let ended = false;
    let timer: NodeJS.Timeout | undefined;
    void this.ackDeadline.then((deadlineMs) => {
      if (ended || deadlineMs === undefined) return;
      const extend = () => void connection.answer({ deliveryId, action: 'extend', deadlineMs }).catch(() => false);
      timer = setInterval(extend, Math.max(1, Math.floor(deadlineMs / 3)));
      timer.unref();
    });
    return () => {
      ended = true;
      clearInterval(timer);
    };
  }

  /** Iterator mode: the caller answers; an ack records the event in the dedupe store first. */
  private async offer(connection: Connection, deliveryId: string, event: CloudEvent<unknown>): Promise<void> {
    if (await this.isDuplicate(connection, deliveryId, event)) return;
    this.ready.push({
      deliveryId,
      event,
      transport: connection.transport,
      ack: async () => {
        this.stats.handled++;
        await this.dedupe?.record(event.source, event.id);
        await this.answer(connection, { deliveryId, action: 'ack' });
      },
      nack: (delayMs) =>
        this.answer(connection, { deliveryId, action: 'nack', delayMs: delayMs ?? this.options.nackDelayMs ?? 1000 }),
      reject: (reason) => this.answer(connection, { deliveryId, action: 'reject', reason }),
    });
    this.wakeIterator?.();
  }

  private async isDuplicate(connection: Connection, deliveryId: string, event: CloudEvent<unknown>): Promise<boolean> {
    if (!this.dedupe || !(await this.dedupe.seen(event.source, event.id))) return false;
    this.stats.duplicates++;
    await this.answer(connection, { deliveryId, action: 'ack' });
    return true;
  }

  /**
   * Answers on the connection that brought the delivery. If that connection is gone the runtime gave the delivery
   * back already; the answer is dropped and the redelivery is handled (or acked as a duplicate) when it comes.
   */
  private async answer(connection: Connection, a: Answer): Promise<void> {
    const accepted = await connection.answer(a).catch(() => false);
    if (!accepted) return;
    if (a.action === 'ack') this.stats.acked++;
    else if (a.action === 'nack') this.stats.nacked++;
    else this.stats.rejected++;
  }

  private setState(state: ConsumerState, error?: Error): void {
    this.state = state;
    this.emit('state', { state, transport: this.transport, error } satisfies StateChange);
  }
}

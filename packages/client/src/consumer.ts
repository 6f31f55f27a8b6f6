import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { CloudEvent } from 'cloudevents';
import type {
  BatchHandler,
  BatchItem,
  BatchOutcome,
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
import { checkConsumeOptions, RECONNECT_DEFAULTS } from './consume-options';
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
import { batchIdOf } from './transports/batch-parts';
import { connectWebSocket } from './transports/websocket';

const CONNECT: Record<Transport, Connect> = {
  websocket: connectWebSocket,
  sse: connectSse,
  'long-poll': connectLongPoll,
};
const FALLBACK_ORDER: Transport[] = ['websocket', 'sse', 'long-poll'];
/** How long a connection must have lasted for the reconnect backoff after it to start from its first delay. */
const STABLE_CONNECTION_MS = 5000;
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
 *
 * With a batch handler (`consumeBatches`), the deliveries that arrived in one turn go to it together, up to
 * `maxBatchEvents`, one batch at a time: what arrives while a batch runs waits and is the next batch. Duplicates are
 * acked before the batch is handed over (the same event twice in one batch is handed over once and answered twice),
 * and the batch's deliveries are extended while it runs. A consumer of many events per second makes a few promises
 * and answers per batch rather than per event.
 */
export class StreamConsumer extends EventEmitter implements Consumer {
  readonly stats: ConsumerStats = {
    handled: 0,
    duplicates: 0,
    acked: 0,
    nacked: 0,
    rejected: 0,
    reconnects: 0,
    errors: 0,
  };
  state: ConsumerState = 'connecting';
  transport: Transport | undefined;
  private connection: Connection | undefined;
  private readonly dedupe: DedupeStore | undefined;
  private readonly slots: Semaphore;
  /** The work on each event, by dedupe key, while it runs: a redelivery of it waits for it. */
  private readonly running = new Map<string, Promise<void>>();
  private readonly tasks = new Set<Promise<void>>();
  private readonly ready: Delivery[] = [];
  /** Batch mode: the handler, its bound, the deliveries waiting for the next batch, whether one is on its way. */
  private readonly batchHandler: BatchHandler | undefined;
  private readonly maxBatchEvents: number;
  private readonly batchQueue: Queued[] = [];
  private batching = false;
  private wakeIterator: (() => void) | undefined;
  private wakeRun: (() => void) | undefined;
  private draining = false;
  private stopped = false;
  private failure: Error | undefined;
  private readonly done: Promise<void>;
  private readonly window: number;
  private readonly consumerName: string;
  private readonly handler: Handler | undefined;
  /** How far ahead a running handler's delivery is extended; undefined: not extended. */
  private ackDeadline: Promise<number | undefined>;

  constructor(
    private readonly http: HttpClient,
    private readonly subscriptionId: string,
    handler: Handler | { batch: BatchHandler; maxBatchEvents?: number } | undefined,
    private readonly options: ConsumeOptions,
    private readonly connect: Record<Transport, Connect> = CONNECT,
  ) {
    super();
    checkConsumeOptions(options);
    this.handler = typeof handler === 'function' ? handler : undefined;
    this.batchHandler = typeof handler === 'object' ? handler.batch : undefined;
    this.window = options.window ?? 10;
    this.maxBatchEvents = (typeof handler === 'object' ? handler.maxBatchEvents : undefined) ?? this.window;
    this.slots = new Semaphore(options.concurrency ?? this.window);
    this.dedupe = options.dedupe === false ? undefined : (options.dedupe ?? new MemoryDedupeStore());
    this.consumerName = options.consumerName ?? `sdk-${randomUUID()}`;
    this.ackDeadline = this.ackDeadlineOf(options.ackDeadlineMs);
    this.done = this.run();
  }

  override on(event: 'state', listener: (change: StateChange) => void): this;
  override on(event: 'error', listener: (error: Error) => void): this;
  override on(event: 'state' | 'error', listener: (arg: StateChange & Error) => void): this {
    return super.on(event, listener);
  }

  override off(event: 'state', listener: (change: StateChange) => void): this;
  override off(event: 'error', listener: (error: Error) => void): this;
  override off(event: 'state' | 'error', listener: (arg: StateChange & Error) => void): this {
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
    if (this.handler || this.batchHandler) throw new Error('this consumer has a handler: it is not iterated');
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
    const backoff = {
      ...RECONNECT_DEFAULTS,
      ...Object.fromEntries(Object.entries(this.options.reconnect ?? {}).filter(([, v]) => v !== undefined)),
    };
    let next = 0;
    let retry = 0;
    let opened = false;
    while (!this.stopped) {
      let why: Error | undefined;
      try {
        // A transport may hand over deliveries before its connect returns (a long-poll's first poll, frames that
        // came with the WebSocket handshake): they wait here for the connection they came on.
        const opening: { connection?: Connection } = {};
        const early: WireDelivery[] = [];
        const connection: Connection = await this.connect[order[next]]({
          http: this.http,
          subscriptionId: this.subscriptionId,
          window: this.window,
          filter: this.options.filter,
          consumerName: this.consumerName,
          batchFrames: this.options.batchFrames,
          ackDeadlineMs: this.ackDeadline,
          onDelivery: (d) => (opening.connection ? this.take(opening.connection, d) : void early.push(d)),
        });
        opening.connection = connection;
        if (this.stopped) {
          connection.close();
          break;
        }
        for (const d of early.splice(0)) this.take(connection, d);
        if (opened) this.stats.reconnects++;
        opened = true;
        const openedAt = Date.now();
        this.connection = connection;
        this.transport = connection.transport;
        this.setState('connected');
        why = await connection.ended;
        this.connection = undefined;
        // The backoff starts again only after a connection that lasted: one the runtime accepts and drops at once
        // (a restart loop, a proxy) is retried at the growing backoff, not every few milliseconds.
        if (Date.now() - openedAt >= STABLE_CONNECTION_MS) retry = 0;
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
      // The backoff's timer goes when a close wakes the loop first, so a closed consumer holds no timer.
      await new Promise<void>((r) => {
        const timer = setTimeout(r, backoffDelay(++retry, backoff));
        this.wakeRun = () => {
          clearTimeout(timer);
          r();
        };
      });
    }
    this.setState('closed', this.failure);
    this.wakeIterator?.();
  }

  /** A delivery came on `connection`. While draining it is left unanswered: closing gives it back. */
  private take(connection: Connection, wire: WireDelivery): void {
    if (this.draining || this.stopped) return;
    const event = cloudEventOf(wire.event);
    if (this.batchHandler) {
      this.batchQueue.push({
        connection,
        item: { event, deliveryId: wire.deliveryId, transport: connection.transport },
      });
      this.nextBatch();
      return;
    }
    this.track(
      this.handler ? this.inTurn(connection, wire.deliveryId, event) : this.offer(connection, wire.deliveryId, event),
    );
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
    const nackDelayMs = this.options.nackDelayMs ?? 1000;
    try {
      if (await this.isDuplicate(connection, deliveryId, event)) return;
    } catch (e) {
      // The store could not say whether it was handled: it comes again, and is asked again then.
      this.storeFailed(e);
      return this.answer(connection, { deliveryId, action: 'nack', delayMs: nackDelayMs });
    }
    await this.slots.acquire();
    let outcome: Answer;
    const stopExtending = this.keepExtended([{ connection, item: { deliveryId } }]);
    try {
      await this.handler!(event, { deliveryId, transport: connection.transport });
      this.stats.handled++;
      // Handled: acked whatever the store says, as handling it again is what the store is for avoiding.
      await this.dedupe?.record(event.source, event.id).catch((e: unknown) => this.storeFailed(e));
      outcome = { deliveryId, action: 'ack' };
    } catch (e) {
      outcome =
        e instanceof RejectError
          ? { deliveryId, action: 'reject', reason: e.message }
          : { deliveryId, action: 'nack', delayMs: nackDelayMs };
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
   * Extends the deliveries every third of the deadline while their handler runs (from when the deadline is known:
   * the handler does not wait for it); answers what stops the extending when the handler ended.
   */
  private keepExtended(deliveries: { connection: Connection; item: { deliveryId: string } }[]): () => void {
    let ended = false;
    let timer: NodeJS.Timeout | undefined;
    void this.ackDeadline.then((deadlineMs) => {
      if (ended || deadlineMs === undefined) return;
      const extend = () => {
        for (const { connection, item } of deliveries)
          void connection.answer({ deliveryId: item.deliveryId, action: 'extend', deadlineMs }).catch(() => false);
      };
      timer = setInterval(extend, Math.max(1, Math.floor(deadlineMs / 3)));
      timer.unref();
    });
    return () => {
      ended = true;
      clearInterval(timer);
    };
  }

  /**
   * Batch mode: starts the next batch, unless one runs (it starts the next when it ends) or is on its way, once this
   * turn's deliveries joined the queue. Draining, none starts: what waits is given back when the consumer closes.
   */
  private nextBatch(): void {
    if (this.batching || this.batchQueue.length === 0 || this.draining || this.stopped) return;
    this.batching = true;
    setImmediate(() => {
      if (this.draining || this.stopped) {
        this.batching = false;
        return;
      }
      const task = this.runBatch(this.takeBatch());
      this.tasks.add(task);
      void task.finally(() => {
        this.tasks.delete(task);
        this.batching = false;
        this.nextBatch();
      });
    });
  }

  /**
   * The next batch: up to `maxBatchEvents` deliveries, and the rest of a batched subscription's batch whose parts it
   * takes (a runtime batch is answered once all its parts are: split over two handler batches, its first part's answer
   * would wait for the second, which a drain never starts).
   */
  private takeBatch(): Queued[] {
    const batch = this.batchQueue.splice(0, this.maxBatchEvents);
    const last = batchIdOf(batch[batch.length - 1].item.deliveryId);
    let rest = 0;
    while (
      last !== undefined &&
      rest < this.batchQueue.length &&
      batchIdOf(this.batchQueue[rest].item.deliveryId) === last
    )
      rest++;
    return rest > 0 ? batch.concat(this.batchQueue.splice(0, rest)) : batch;
  }

  /** One batch: duplicates acked, the rest handed to the batch handler, each answered as it says. */
  private async runBatch(batch: Queued[]): Promise<void> {
    const fresh: Queued[] = [];
    /** A delivery of an event handed over already in this batch: answered as that one is. */
    const echoes: { delivery: Queued; of: number }[] = [];
    let seen: boolean[] | undefined;
    try {
      seen = this.dedupe
        ? await Promise.all(batch.map(({ item }) => this.dedupe!.seen(item.event.source, item.event.id)))
        : undefined;
    } catch (e) {
      // The store could not say which were handled: the batch comes again, and is asked again then.
      this.storeFailed(e);
      const delayMs = this.options.nackDelayMs ?? 1000;
      this.track(
        this.answerAll(
          batch.map((d) => ({
            connection: d.connection,
            answer: { deliveryId: d.item.deliveryId, action: 'nack', delayMs },
          })),
        ),
      );
      return;
    }
    const first = new Map<string, number>();
    batch.forEach((delivery, i) => {
      if (seen?.[i]) {
        this.stats.duplicates++;
        void this.answer(delivery.connection, { deliveryId: delivery.item.deliveryId, action: 'ack' });
        return;
      }
      const key = dedupeKey(delivery.item.event.source, delivery.item.event.id);
      const at = first.get(key);
      if (at !== undefined) echoes.push({ delivery, of: at });
      else {
        first.set(key, fresh.length);
        fresh.push(delivery);
      }
    });
    if (fresh.length === 0) return;
    const nackDelayMs = this.options.nackDelayMs ?? 1000;
    const stopExtending = this.keepExtended(fresh);
    let outcomes: BatchOutcome[];
    try {
      const answered = await this.batchHandler!(fresh.map((d) => d.item));
      outcomes = answered === undefined ? fresh.map(() => 'ack') : checkedOutcomes(answered, fresh.length);
    } catch (e) {
      const all: BatchOutcome = e instanceof RejectError ? { reject: e.message } : { nack: true };
      outcomes = fresh.map(() => all);
    } finally {
      stopExtending();
    }
    const acked = fresh.filter((_, i) => outcomes[i] === 'ack');
    this.stats.handled += acked.length;
    if (this.dedupe)
      await Promise.all(acked.map(({ item }) => this.dedupe!.record(item.event.source, item.event.id))).catch(
        (e: unknown) => this.storeFailed(e),
      );
    const answerOf = (deliveryId: string, o: BatchOutcome): Answer =>
      o === 'ack'
        ? { deliveryId, action: 'ack' }
        : 'reject' in o
          ? { deliveryId, action: 'reject', reason: o.reject }
          : { deliveryId, action: 'nack', delayMs: o.delayMs ?? nackDelayMs };
    // Answered: the next batch starts now, not after the runtime confirmed these answers (a round trip); the
    // confirmations are awaited as tasks of their own (drain waits for them).
    this.track(
      this.answerAll([
        ...fresh.map((d, i) => ({ connection: d.connection, answer: answerOf(d.item.deliveryId, outcomes[i]) })),
        ...echoes.map(({ delivery, of }) => {
          if (outcomes[of] === 'ack') this.stats.duplicates++;
          return { connection: delivery.connection, answer: answerOf(delivery.item.deliveryId, outcomes[of]) };
        }),
      ]),
    );
  }

  /**
   * A batch's answers, as {@link answer} each, waiting once per distinct confirmation: the parts of one runtime
   * batch answered alike share theirs (batch-parts.ts), so a batch of 500 waits for one promise, not 500.
   */
  private async answerAll(list: { connection: Connection; answer: Answer }[]): Promise<void> {
    const confirmations = list.map(({ connection, answer }) => connection.answer(answer));
    const distinct = [...new Set(confirmations)];
    const taken = await Promise.all(distinct.map((c) => c.catch(() => false)));
    const takenBy = new Map(distinct.map((c, i) => [c, taken[i]]));
    list.forEach(({ answer }, i) => takenBy.get(confirmations[i]) && this.count(answer));
  }

  /** Work the consumer waits for before it drains: a task until it ends. */
  private track(work: Promise<unknown>): void {
    // What fails in here is answered where it fails (a nack, or a dropped answer the runtime redelivers); a task
    // never rejects, so nothing is an unhandled rejection and a drain waits for every one.
    const task = work.then(
      () => undefined,
      (e: unknown) => this.storeFailed(e),
    );
    this.tasks.add(task);
    void task.finally(() => this.tasks.delete(task));
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
    if (await connection.answer(a).catch(() => false)) this.count(a);
  }

  /** An answer the runtime took, in the stats. */
  private count(a: Answer): void {
    if (a.action === 'ack') this.stats.acked++;
    else if (a.action === 'nack') this.stats.nacked++;
    else this.stats.rejected++;
  }

  /** A failure of the dedupe store (or another that is nobody's to answer): counted, and emitted as `error` when heard. */
  private storeFailed(e: unknown): void {
    this.stats.errors++;
    if (this.listenerCount('error') > 0) this.emit('error', e instanceof Error ? e : new Error(String(e)));
  }

  private setState(state: ConsumerState, error?: Error): void {
    this.state = state;
    this.emit('state', { state, transport: this.transport, error } satisfies StateChange);
  }
}

/** A delivery waiting for (or in) a batch, with the connection that brought it (its answers go there). */
interface Queued {
  connection: Connection;
  item: BatchItem;
}

/** A batch handler's list, checked: as long as the batch, each entry an outcome; else it is the handler's error. */
function checkedOutcomes(answered: unknown, length: number): BatchOutcome[] {
  if (!Array.isArray(answered) || answered.length !== length)
    throw new TypeError(
      `a batch handler answers nothing or one outcome per event: ${length} expected, got ` +
        (Array.isArray(answered) ? answered.length : typeof answered),
    );
  for (const o of answered as unknown[]) {
    const valid =
      o === 'ack' ||
      (typeof o === 'object' &&
        o !== null &&
        (('nack' in o && (o as { nack: unknown }).nack === true) ||
          ('reject' in o && typeof (o as { reject: unknown }).reject === 'string')));
    if (!valid)
      throw new TypeError(
        `a batch handler's outcome is 'ack', { nack: true } or { reject: reason }: got ${JSON.stringify(o)}`,
      );
  }
  return answered as BatchOutcome[];
}

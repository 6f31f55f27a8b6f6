import type { CloudEvent } from 'cloudevents';
import type { BatchConsumeOptions, BatchHandler, Consumer, ConsumeOptions, Handler } from './consumer-types';
import { StreamConsumer } from './consumer';
import { cloudEventOf, structuredJson, type EventInput } from './events';
import { HttpClient, parseBody } from './http';
import type { EventMeshClientOptions } from './options';
import type { PublishResult, ReplyResult } from './api-types';
import { Publisher, traceHeaders, type PublishCallOptions, type PublishManyOptions } from './publisher';
import { Streaming, type StreamingOptions } from './streaming';
import { Subscriptions } from './subscriptions';

/** The runtime's wait for a reply when `request` names none. */
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** The longest wait for a reply the runtime takes. */
const MAX_REQUEST_TIMEOUT_MS = 300_000;

export interface RequestOptions extends PublishCallOptions {
  /** How long the runtime waits for the reply (default 30 000, at most 300 000); then `RequestTimeoutError`. */
  timeoutMs?: number;
}

/**
 * The event mesh from TypeScript: publish CloudEvents (batched, retried with the same ids, flow-controlled),
 * request-reply, manage subscriptions, and consume stream subscriptions.
 *
 * ```ts
 * const mesh = new EventMeshClient({ url: 'http://127.0.0.1:3000', token });
 * await mesh.publish({ type: 'order.created', source: '/shop', data: { id: 7 } });
 * ```
 */
export class EventMeshClient {
  /** The caller's tenant's subscriptions. */
  readonly subscriptions: Subscriptions;
  private readonly http: HttpClient;
  private readonly publisher: Publisher;
  private readonly consumers = new Set<Consumer>();
  private streams?: Streaming;

  constructor(private readonly options: EventMeshClientOptions) {
    this.http = new HttpClient(options);
    this.publisher = new Publisher(this.http, options.publish, options.topic);
    this.subscriptions = new Subscriptions(this.http);
  }

  /**
   * Publishes one event; resolves once Kafka acknowledged it, with where it was written. Publishes made together
   * share one HTTP request (see `publish.lingerMs`). Waits while `publish.maxEventsInFlight`/`maxBytesInFlight`
   * are reached.
   */
  async publish(event: EventInput, call?: PublishCallOptions): Promise<PublishResult> {
    // async: an event JSON cannot write (a BigInt, a cycle) rejects the promise rather than throwing at the call.
    return this.publisher.publish(structuredJson(event, this.options.source), call);
  }

  /**
   * Publishes many events, in batch requests cut at the batch bounds; resolves with each event's result in order.
   * With `ordered`, they are written in the order given (see `PublishManyOptions`).
   * Each event is serialized only once there is room in flight for it, so a long list (or a generator) costs the
   * flow-control bounds in memory, not its whole size.
   */
  publishMany(events: Iterable<EventInput>, call?: PublishManyOptions): Promise<PublishResult[]> {
    return this.publisher.publishMany(events, (e) => structuredJson(e, this.options.source), call);
  }

  /** Publishes `event` as a request and resolves with the reply event; rejects with `RequestTimeoutError` on the runtime's 408. */
  async request(event: EventInput, options: RequestOptions = {}): Promise<CloudEvent<unknown>> {
    const { timeoutMs } = options;
    if (
      timeoutMs !== undefined &&
      !(Number.isSafeInteger(timeoutMs) && timeoutMs >= 1 && timeoutMs <= MAX_REQUEST_TIMEOUT_MS)
    )
      throw new RangeError(
        `timeoutMs must be a whole number of ms in 1..${MAX_REQUEST_TIMEOUT_MS}, got ${String(timeoutMs)}`,
      );
    const answer = await this.http.send({
      method: 'POST',
      path: '/events/request',
      query: { topic: options.topic ?? this.options.topic, timeoutMs: options.timeoutMs },
      headers: { 'content-type': 'application/cloudevents+json', ...traceHeaders(options) },
      body: structuredJson(event, this.options.source),
      // Not sent again after a reset or a timeout: the runtime gives each attempt its own correlation id, so a second
      // attempt is a second request (handled twice, or dropped by a responder deduping by event id and answered 408).
      idempotent: false,
      // The runtime holds the request up to its timeoutMs for the reply: the attempt waits that long and its own.
      timeoutMs: this.http.attemptTimeoutMs + (options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS),
    });
    return cloudEventOf(parseBody(answer.text));
  }

  /** Answers `request` (an event a responder consumed) with `reply`: the reply carries the request's `correlationid`. */
  async reply(request: CloudEvent<unknown>, reply: EventInput): Promise<ReplyResult> {
    const correlationid = request.correlationid;
    const body = JSON.parse(structuredJson(reply, this.options.source)) as Record<string, unknown>;
    const answer = await this.http.send({
      method: 'POST',
      path: '/events/reply',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ ...body, correlationid }),
      idempotent: true,
      timeoutMs: this.http.attemptTimeoutMs,
    });
    return JSON.parse(answer.text) as ReplyResult;
  }

  /**
   * Consumes a STREAM subscription. With a handler, each event is handed to it (ack on success, nack on a throw,
   * reject on `RejectError`); without one, iterate the consumer and answer each delivery.
   */
  consume(subscriptionId: string, handler: Handler, options?: ConsumeOptions): Consumer;
  consume(subscriptionId: string, options?: ConsumeOptions): Consumer;
  consume(subscriptionId: string, handlerOrOptions?: Handler | ConsumeOptions, options?: ConsumeOptions): Consumer {
    const handler = typeof handlerOrOptions === 'function' ? handlerOrOptions : undefined;
    const opts = (typeof handlerOrOptions === 'function' ? options : handlerOrOptions) ?? {};
    return this.track(new StreamConsumer(this.http, subscriptionId, handler, opts));
  }

  /**
   * Consumes a STREAM subscription in batches: the deliveries that arrived together (up to `maxBatchEvents`, default
   * the window) go to `handler` at once, one batch at a time, and each is answered as the handler says (see
   * `BatchHandler`). For a consumer that writes many events at once (a table, a bulk API): a few promises and
   * answers per batch rather than per event.
   */
  consumeBatches(subscriptionId: string, handler: BatchHandler, options: BatchConsumeOptions = {}): Consumer {
    const { maxBatchEvents, ...rest } = options;
    if (maxBatchEvents !== undefined && (!Number.isInteger(maxBatchEvents) || maxBatchEvents < 1))
      throw new RangeError(`maxBatchEvents must be a positive integer, got ${String(maxBatchEvents)}`);
    return this.track(new StreamConsumer(this.http, subscriptionId, { batch: handler, maxBatchEvents }, rest));
  }

  private track(consumer: StreamConsumer): Consumer {
    this.consumers.add(consumer);
    consumer.on('state', (s) => s.state === 'closed' && this.consumers.delete(consumer));
    return consumer;
  }

  /**
   * Streaming sessions (docs/streaming-sessions.md): serve an agent, open sessions to agents and read each call's answer
   * as a stream of chunks. One WebSocket per client, opened on first use; the same object on every call.
   */
  streaming(options?: StreamingOptions): Streaming {
    this.streams ??= new Streaming(this.http, options);
    return this.streams;
  }

  /**
   * Sends the publishes still lingering (`lingerMs`), waits for every publish in flight to be answered (each attempt
   * within `retry.attemptTimeoutMs`), drains every consumer of this client and ends its streaming connection.
   */
  async close(): Promise<void> {
    await Promise.all([this.publisher.drain(), ...[...this.consumers].map((c) => c.drain())]);
    this.streams?.close();
  }
}

import { randomUUID } from 'node:crypto';
import { RejectError, RequestTimeoutError } from '@eventmesh/client';
import { CloudEvent, type CloudEventV1 } from 'cloudevents';
import type { MeshClientPort, MeshConsumer, MeshEventHandler, StreamSubscriptionSpec } from '../mesh-client-port';
import { matches } from './filter-match';

/** What a delivery's handler did, in the order the answers came. */
export interface InMemoryAnswer {
  subscription: string;
  event: CloudEvent<unknown>;
  attempt: number;
  action: 'ack' | 'nack' | 'reject';
  error?: unknown;
}

export interface InMemoryEventMeshClientOptions {
  /** The topic of `publish` and `request` when the call names none (default `events`). */
  topic?: string;
  /** Attempts of an event whose handler keeps throwing before it is dead-lettered (the runtime's default: 10). */
  maxAttempts?: number;
}

interface Delivery {
  event: CloudEvent<unknown>;
  attempt: number;
}

interface Subscription {
  id: string;
  spec: StreamSubscriptionSpec;
  consumers: InMemoryConsumer[];
  next: number;
}

/**
 * A stand-in for `EventMeshClient` in unit tests of an app's own handlers: `publish`, `publishMany` and `request`
 * deliver in-process to the `@OnMeshEvent` and `@MeshResponder` methods the module discovered, with the runtime's
 * contract: a subscription sees the events published after it was created, on its topic and matching its
 * filters; resolving acks, a throw delivers the event again (up to `maxAttempts`, then dead-letters it), a
 * `RejectError` dead-letters it; LOAD_BALANCE hands an event to one consumer, BROADCAST and MULTICAST to each.
 * `settled()` waits until every delivery was answered; `published`, `answers` and `deadLetters` are there to
 * assert on. Filters of the `sql` dialect are not supported (refused when the subscription is created).
 */
export class InMemoryEventMeshClient implements MeshClientPort {
  readonly published: CloudEvent<unknown>[] = [];
  readonly answers: InMemoryAnswer[] = [];
  readonly deadLetters: InMemoryAnswer[] = [];
  private readonly subscriptions = new Map<string, Subscription>();
  private readonly pendingRequests = new Map<string, (reply: CloudEvent<unknown>) => void>();
  private readonly running = new Set<Promise<void>>();
  private readonly topic: string;
  private readonly maxAttempts: number;

  constructor(options: InMemoryEventMeshClientOptions = {}) {
    this.topic = options.topic ?? 'events';
    this.maxAttempts = options.maxAttempts ?? 10;
  }

  async publish(input: CloudEvent<unknown> | Partial<CloudEventV1<unknown>>, options: { topic?: string } = {}) {
    const event =
      input instanceof CloudEvent
        ? input
        : new CloudEvent<unknown>({ id: randomUUID(), source: '/in-memory', ...input } as CloudEventV1<unknown>);
    const topic = options.topic ?? this.topic;
    this.published.push(event);
    for (const sub of this.subscriptions.values()) {
      if (sub.spec.topic === topic && sub.spec.filters.every((f) => matches(f, event)))
        this.dispatch(sub, { event, attempt: 1 });
    }
    return { id: event.id, topic, partition: 0, offset: String(this.published.length - 1) };
  }

  async publishMany(
    inputs: (CloudEvent<unknown> | Partial<CloudEventV1<unknown>>)[],
    options: { topic?: string } = {},
  ) {
    return Promise.all(inputs.map((e) => this.publish(e, options)));
  }

  /** Publishes the request with a fresh `correlationid` and resolves with the reply a responder posts; `RequestTimeoutError` after `timeoutMs`. */
  async request(
    input: CloudEvent<unknown> | Partial<CloudEventV1<unknown>>,
    options: { topic?: string; timeoutMs?: number } = {},
  ): Promise<CloudEvent<unknown>> {
    const correlationid = randomUUID();
    const base = input instanceof CloudEvent ? input.toJSON() : input;
    const timeoutMs = options.timeoutMs ?? 30000;
    const reply = new Promise<CloudEvent<unknown>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pendingRequests.delete(correlationid);
        reject(
          new RequestTimeoutError('REQUEST_TIMEOUT', `no reply within ${timeoutMs} ms`, 408, {
            code: 'REQUEST_TIMEOUT',
            correlationId: correlationid,
          }),
        );
      }, timeoutMs);
      this.pendingRequests.set(correlationid, (event) => {
        clearTimeout(timer);
        resolve(event);
      });
    });
    await this.publish({ ...base, correlationid }, options);
    return reply;
  }

  async reply(request: CloudEvent<unknown>, reply: CloudEvent<unknown>): Promise<boolean> {
    const correlationid = String(request.correlationid);
    const waiting = this.pendingRequests.get(correlationid);
    this.pendingRequests.delete(correlationid);
    waiting?.(reply.cloneWith({ correlationid }));
    return waiting !== undefined;
  }

  async ensureStreamSubscription(spec: StreamSubscriptionSpec): Promise<string> {
    const existing = [...this.subscriptions.values()].find((s) => s.spec.name === spec.name);
    if (existing) return existing.id;
    if (JSON.stringify(spec.filters).includes('"sql"'))
      throw new Error(`subscription ${spec.name}: sql filters are not supported by InMemoryEventMeshClient`);
    const id = randomUUID();
    this.subscriptions.set(id, { id, spec, consumers: [], next: 0 });
    return id;
  }

  /** `concurrency` defaults to `window` (10), as the SDK's consumer's does. */
  consume(
    subscriptionId: string,
    handler: MeshEventHandler,
    options: { window?: number; concurrency?: number } = {},
  ): MeshConsumer {
    const sub = this.subscriptions.get(subscriptionId);
    if (!sub) throw new Error(`no subscription ${subscriptionId}`);
    const consumer = new InMemoryConsumer(
      handler,
      options.concurrency ?? options.window ?? 10,
      (delivery, action, error) => this.answer(sub, delivery, action, error),
    );
    sub.consumers.push(consumer);
    return {
      get state() {
        return consumer.state;
      },
      drain: async () => {
        sub.consumers.splice(sub.consumers.indexOf(consumer), 1);
        await consumer.drain();
      },
    };
  }

  async close(): Promise<void> {}

  /** Resolves once every delivery (redeliveries included) was answered. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  private dispatch(sub: Subscription, delivery: Delivery): void {
    if (sub.consumers.length === 0) return;
    const policy = sub.spec.policy ?? 'LOAD_BALANCE';
    const targets = policy === 'LOAD_BALANCE' ? [sub.consumers[sub.next++ % sub.consumers.length]] : sub.consumers;
    for (const consumer of targets) {
      const run = consumer.take(delivery);
      this.running.add(run);
      void run.finally(() => this.running.delete(run));
    }
  }

  private answer(sub: Subscription, delivery: Delivery, action: InMemoryAnswer['action'], error?: unknown): void {
    const answer: InMemoryAnswer = {
      subscription: sub.spec.name,
      event: delivery.event,
      attempt: delivery.attempt,
      action,
      error,
    };
    this.answers.push(answer);
    if (action === 'reject' || (action === 'nack' && delivery.attempt >= this.maxAttempts))
      this.deadLetters.push(answer);
    else if (action === 'nack') this.dispatch(sub, { event: delivery.event, attempt: delivery.attempt + 1 });
  }
}

/** One consumer: at most `concurrency` handler calls at once, the rest queued; an answer only after the handler settled. */
class InMemoryConsumer {
  private readonly queue: { delivery: Delivery; done: () => void }[] = [];
  private active = 0;
  private idle?: () => void;
  state: 'connected' | 'draining' | 'closed' = 'connected';

  constructor(
    private readonly handler: MeshEventHandler,
    private readonly concurrency: number,
    private readonly answer: (delivery: Delivery, action: InMemoryAnswer['action'], error?: unknown) => void,
  ) {}

  take(delivery: Delivery): Promise<void> {
    return new Promise((done) => {
      this.queue.push({ delivery, done });
      this.pump();
    });
  }

  async drain(): Promise<void> {
    this.state = 'draining';
    if (this.active > 0 || this.queue.length > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    this.state = 'closed';
  }

  private pump(): void {
    while (this.active < this.concurrency && this.queue.length > 0) {
      const { delivery, done } = this.queue.shift()!;
      this.active++;
      void this.run(delivery).finally(() => {
        this.active--;
        done();
        this.pump();
        if (this.active === 0 && this.queue.length === 0) this.idle?.();
      });
    }
  }

  private async run(delivery: Delivery): Promise<void> {
    try {
      // The SDK's HandlerContext (deliveryId, transport), plus the attempt a test may want to see.
      await this.handler(delivery.event, {
        deliveryId: randomUUID(),
        transport: 'in-memory',
        attempt: delivery.attempt,
      });
      this.answer(delivery, 'ack');
    } catch (error) {
      this.answer(delivery, error instanceof RejectError ? 'reject' : 'nack', error);
    }
  }
}

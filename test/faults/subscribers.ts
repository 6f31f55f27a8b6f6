import WebSocket from 'ws';
import type { Delivery, SubscriptionLog } from './checker';
import { WebhookReceiver } from '../support/webhook-receiver';
import { sleep } from './workload';

/** Retry settings of the workload's subscriptions: quick retries, and nothing dead-lettered by a long fault. */
const RETRY = { maxAttempts: 1000, initialDelayMs: 100, maxDelayMs: 2000 };

/** One subscription and the client(s) that receive its events, recording each delivery. */
export interface Subscriber {
  readonly name: string;
  readonly transport: SubscriptionLog['transport'];
  readonly ordered: boolean;
  /** Set once created. */
  subscriptionId?: string;
  readonly deliveries: Delivery[];
  /** Distinct event ids received. */
  readonly seen: Set<string>;
  /** Creates the subscription on the instance at `api` (which then dispatches it) and starts receiving. */
  start(api: () => string | undefined, topic: string): Promise<void>;
  stop(): Promise<void>;
  log(): SubscriptionLog;
}

abstract class BaseSubscriber implements Subscriber {
  abstract readonly transport: string;
  readonly ordered: boolean = false;
  subscriptionId?: string;
  readonly deliveries: Delivery[] = [];
  protected stopping = false;
  protected api: () => string | undefined = () => undefined;
  /** Distinct ids received, to wait on. */
  readonly seen = new Set<string>();

  constructor(readonly name: string) {}

  abstract start(api: () => string | undefined, topic: string): Promise<void>;
  abstract stop(): Promise<void>;

  protected record(id: string): void {
    this.deliveries.push({ id });
    this.seen.add(id);
  }

  protected async create(api: () => string | undefined, body: Record<string, unknown>): Promise<void> {
    this.api = api;
    const response = await fetch(`${api()}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(20000),
    });
    const answer = (await response.json()) as { id: string };
    if (response.status !== 201)
      throw new Error(`${this.name}: create answered ${response.status} ${JSON.stringify(answer)}`);
    this.subscriptionId = answer.id;
  }

  log(): SubscriptionLog {
    return { name: this.name, transport: this.transport, ordered: this.ordered, deliveries: [...this.deliveries] };
  }
}

/** A webhook subscription with a loopback sink that acknowledges (200) every event. Order per partition is promised. */
export class WebhookSubscriber extends BaseSubscriber {
  readonly transport = 'webhook';
  override readonly ordered = true;
  readonly receiver = new WebhookReceiver();

  async start(api: () => string | undefined, topic: string): Promise<void> {
    const sink = await this.receiver.start();
    this.receiver.onEvent = (r) => this.record(String(r.headers['ce-id']));
    await this.create(api, { sink, protocol: 'HTTP', topic, config: { retry: RETRY } });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.receiver.stop();
  }
}

interface StreamDelivery {
  deliveryId: string;
  event: { id: string };
}

abstract class StreamSubscriber extends BaseSubscriber {
  private loop?: Promise<void>;
  protected abort = new AbortController();
  /** Connections (re)opened: a client follows its instance across restarts. */
  connects = 0;
  /** Why sessions ended, by HTTP status or error name: a refused client shows here, not as silence. */
  readonly ends: Record<string, number> = {};

  async start(api: () => string | undefined, topic: string): Promise<void> {
    await this.create(api, { protocol: 'STREAM', topic, config: { retry: RETRY, ackTimeoutMs: 5000 } });
    this.loop = this.run();
  }

  /** Keeps a client connected while not stopping: reconnects after an error or a closed connection. */
  private async run(): Promise<void> {
    while (!this.stopping) {
      const api = this.api();
      if (api) {
        try {
          this.connects++;
          this.ended(await this.session(api));
        } catch (e) {
          // the instance is down, restarting or stopped: connect again
          this.ended((e as Error).name);
        }
      }
      if (!this.stopping) await sleep(250);
    }
  }

  private ended(why: string): void {
    this.ends[why] = (this.ends[why] ?? 0) + 1;
  }

  /** One connection, until it ends or the subscriber stops; resolves with why it ended. */
  protected abstract session(api: string): Promise<string>;

  protected async ack(api: string, deliveryIds: string[]): Promise<void> {
    if (deliveryIds.length === 0) return;
    const body = JSON.stringify(deliveryIds.map((deliveryId) => ({ deliveryId, action: 'ack' })));
    const response = await fetch(`${api}/subscriptions/${this.subscriptionId}/acks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(10000),
    });
    await response.arrayBuffer();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.abort.abort();
    await this.loop;
  }
}

/** A WebSocket client: acks on the same socket. */
export class WebSocketSubscriber extends StreamSubscriber {
  readonly transport = 'websocket';

  protected session(api: string): Promise<string> {
    return new Promise<string>((resolve) => {
      const socket = new WebSocket(`${api.replace('http', 'ws')}/subscriptions/${this.subscriptionId}/ws?window=50`);
      let why = 'closed';
      const done = () => {
        this.abort.signal.removeEventListener('abort', done);
        socket.terminate();
        resolve(why);
      };
      this.abort.signal.addEventListener('abort', done);
      socket.on('message', (m) => {
        const message = JSON.parse(String(m)) as { type: string } & Partial<StreamDelivery>;
        if (message.type !== 'event') return;
        this.record(message.event!.id);
        socket.send(JSON.stringify({ type: 'ack', deliveryId: message.deliveryId }));
      });
      socket.on('error', () => {
        why = 'error';
        done();
      });
      socket.on('close', done);
      socket.on('unexpected-response', (_request, response) => {
        why = String(response.statusCode);
        done();
      });
    });
  }
}

/** A Server-Sent Events client: acks each event by POST /acks. */
export class SseSubscriber extends StreamSubscriber {
  readonly transport = 'sse';

  protected async session(api: string): Promise<string> {
    const response = await fetch(`${api}/subscriptions/${this.subscriptionId}/events?window=50`, {
      signal: this.abort.signal,
    });
    if (response.status !== 200 || !response.body) {
      await response.arrayBuffer().catch(() => undefined);
      return String(response.status);
    }
    const reader = response.body.getReader();
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return 'ended';
      text += Buffer.from(value).toString();
      let end: number;
      const acks: string[] = [];
      while ((end = text.indexOf('\n\n')) >= 0) {
        const message = text.slice(0, end);
        text = text.slice(end + 2);
        const data = /^data: (.*)$/m.exec(message);
        if (!/^event: cloudevent$/m.test(message) || !data) continue;
        const delivery = JSON.parse(data[1]) as StreamDelivery;
        this.record(delivery.event.id);
        acks.push(delivery.deliveryId);
      }
      await this.ack(api, acks);
    }
  }
}

/** A long-poll consumer: polls, records, acks the batch, polls again. */
export class LongPollSubscriber extends StreamSubscriber {
  readonly transport = 'long-poll';

  protected async session(api: string): Promise<string> {
    for (;;) {
      if (this.stopping) return 'stopped';
      const query = new URLSearchParams({
        consumer: `${this.name}-consumer`,
        window: '100',
        max: '100',
        waitMs: '2000',
      });
      const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(15000)]);
      const response = await fetch(`${api}/subscriptions/${this.subscriptionId}/poll?${query}`, { signal });
      if (response.status !== 200) {
        await response.arrayBuffer();
        return String(response.status);
      }
      const { deliveries } = (await response.json()) as { deliveries: StreamDelivery[] };
      for (const d of deliveries) this.record(d.event.id);
      await this.ack(
        api,
        deliveries.map((d) => d.deliveryId),
      );
    }
  }
}

/** Waits until every subscriber has every id, or the deadline passes; resolves with whether they all did. */
export async function drain(subscribers: Subscriber[], ids: string[], deadlineMs: number): Promise<boolean> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    if (subscribers.every((s) => ids.every((id) => s.seen.has(id)))) return true;
    if (Date.now() >= deadline) return false;
    await sleep(200);
  }
}

/** The dead letters of a subscription (its events that will not be delivered), from the instance that has it. */
export async function deadLetterCount(api: string, subscriptionId: string): Promise<number> {
  let count = 0;
  let cursor: string | null = null;
  do {
    const query: string = `limit=1000${cursor ? `&cursor=${cursor}` : ''}`;
    const response = await fetch(`${api}/subscriptions/${subscriptionId}/dead-letters?${query}`, {
      signal: AbortSignal.timeout(10000),
    });
    if (response.status !== 200) return NaN;
    const page = (await response.json()) as { items: unknown[]; next: string | null };
    count += page.items.length;
    cursor = page.next;
  } while (cursor);
  return count;
}

import WebSocket from 'ws';
import { EventMeshClient, type Consumer } from '@eventmesh/client';
import { nestSubscriber } from './nest-subscriber';
import { until } from './support';

/**
 * The three stream subscribers bench:e2e compares, each calling `record(id)` as an event arrives. Each resolves,
 * once connected, with its close.
 */
export type SubscriberKind = 'raw' | 'sdk' | 'nestjs';

export interface SubscriberTarget {
  url: string;
  /** The subscription's id (the raw client and the SDK consume it by id). */
  subscriptionId: string;
  /** Its topic and name (the NestJS module ensures the subscription by name, as a user's handler does). */
  topic: string;
  name: string;
}

export function startSubscriber(
  kind: SubscriberKind,
  target: SubscriberTarget,
  record: (id: string) => void,
): Promise<() => Promise<void>> {
  if (kind === 'sdk') return sdkSubscriber(target, record);
  if (kind === 'nestjs') return nestSubscriber(target.url, target.topic, target.name, record);
  return rawSubscriber(target, record);
}

/**
 * The raw WebSocket client: parse each frame, ack each event as it comes (window 1000); a batched subscription's
 * batch (`{"type":"batch",...}`) is recorded event by event and acked once.
 */
async function rawSubscriber(target: SubscriberTarget, record: (id: string) => void): Promise<() => Promise<void>> {
  const socket = new WebSocket(
    `${target.url.replace('http', 'ws')}/subscriptions/${target.subscriptionId}/ws?window=1000&batches=true`,
  );
  socket.on('message', (raw) => {
    const m = JSON.parse(String(raw)) as {
      type: string;
      deliveryId: string;
      event: { id: string };
      events?: { id: string }[];
    };
    if (m.type === 'batch') for (const e of m.events ?? []) record(e.id);
    else if (m.type === 'event') record(m.event.id);
    else return;
    socket.send(JSON.stringify({ type: 'ack', deliveryId: m.deliveryId }));
  });
  await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
  return async () => socket.close();
}

/** `@eventmesh/client`'s consumer: WebSocket, window 1000, a handler per event, acked after it, in-memory dedupe. */
async function sdkSubscriber(target: SubscriberTarget, record: (id: string) => void): Promise<() => Promise<void>> {
  const consumer: Consumer = new EventMeshClient({ url: target.url }).consume(
    target.subscriptionId,
    (event) => record(event.id),
    { transport: 'websocket', window: 1000 },
  );
  await until('the SDK consumer connected', () => (consumer.state === 'connected' ? true : undefined), 60000);
  return () => consumer.close();
}

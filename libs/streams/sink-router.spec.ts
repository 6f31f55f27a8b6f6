import type { WebhookResult, WebhookSender } from '@libs/delivery/webhook-sender';
import type { EventFrame } from '@libs/frame';
import type { SubscriptionEntity } from '@libs/storage';
import { DeliveryOutcome, TRACING_OFF, Tracing } from '@libs/tracing';
import { SinkRouter } from './sink-router';
import type { StreamDeliverer, StreamOutcome } from './stream-hub';

const frame: EventFrame = {
  id: 'e1',
  source: '/s',
  type: 't',
  extensions: { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` },
};
const webhookTarget = {
  id: 'sub-w',
  topic: 'orders',
  protocol: 'HTTP',
  sink: 'http://127.0.0.1:9/hook',
  signingSecret: null,
} as unknown as SubscriptionEntity;
const streamTarget = { id: 'sub-s', topic: 'orders', protocol: 'STREAM', config: {} } as unknown as SubscriptionEntity;

/** A tracing that records the delivery spans asked of it (the OpenTelemetry one is otel-tracing.spec.ts's). */
function recordingTracing() {
  const spans: { subscription: string; transport: string; outcome?: DeliveryOutcome; status?: number }[] = [];
  const tracing: Tracing = {
    ...TRACING_OFF,
    enabled: true,
    startDelivery(target, _frame, transport) {
      const span: (typeof spans)[number] = { subscription: target.id, transport };
      spans.push(span);
      return {
        headers: { traceparent: `00-${'a'.repeat(32)}-${'c'.repeat(16)}-01` },
        end: (outcome, detail) => Object.assign(span, { outcome, status: detail?.status }),
      };
    },
  };
  return { tracing, spans };
}

describe('SinkRouter tracing', () => {
  const sent: { trace: unknown }[] = [];
  let webhookResult: WebhookResult = { ok: true, status: 200 };
  const webhooks = {
    send: async (_t: unknown, _f: unknown, _m: unknown, _s: unknown, trace: unknown) => (
      sent.push({ trace }),
      webhookResult
    ),
  } as unknown as WebhookSender;
  let streamOutcome: StreamOutcome = { kind: 'ack' };
  const streams: StreamDeliverer = {
    deliver: async () => streamOutcome,
    deliverBatch: async () => streamOutcome,
  };

  it("off: the webhook gets no span context (the sender then sends the event's own)", async () => {
    await new SinkRouter(webhooks, streams).send(webhookTarget, frame, 'm1');
    expect(sent.at(-1)).toEqual({ trace: undefined });
  });

  it("on: each attempt is a span with its transport and outcome, and the webhook carries the span's context", async () => {
    const { tracing, spans } = recordingTracing();
    const router = new SinkRouter(webhooks, streams, 0, tracing).withEpoch(3);
    await router.send(webhookTarget, frame, 'm1');
    expect(sent.at(-1)).toEqual({ trace: { traceparent: `00-${'a'.repeat(32)}-${'c'.repeat(16)}-01` } });
    webhookResult = { ok: false, status: 410, gone: true, error: 'HTTP 410' };
    await router.send(webhookTarget, frame, 'm2');
    webhookResult = { ok: false, status: 503, error: 'HTTP 503' };
    await router.send(webhookTarget, frame, 'm3');
    streamOutcome = { kind: 'reject', reason: 'bad' };
    await router.send(streamTarget, frame, 'm4');
    streamOutcome = { kind: 'gone' };
    await router.send(streamTarget, frame, 'm5');
    expect(spans).toEqual([
      { subscription: 'sub-w', transport: 'webhook', outcome: 'delivered', status: 200 },
      { subscription: 'sub-w', transport: 'webhook', outcome: 'gone', status: 410 },
      { subscription: 'sub-w', transport: 'webhook', outcome: 'failed', status: 503 },
      { subscription: 'sub-s', transport: 'stream', outcome: 'rejected', status: undefined },
      { subscription: 'sub-s', transport: 'stream', outcome: 'not-attempted', status: undefined },
    ]);
  });
});

describe('SinkRouter batches', () => {
  const entries = [Buffer.from('{"id":"e1"}'), Buffer.from('{"id":"e2"}')];
  const batch = { entries, frames: [frame, { ...frame, id: 'e2' }] };

  it("sends a webhook subscription's batch as one request, and a stream subscription's as one stream delivery under the loop's epoch", async () => {
    const posted: unknown[] = [];
    const webhooks = {
      sendBatch: async (_t: unknown, b: unknown, messageId: string) => (posted.push({ b, messageId }), { ok: true }),
    } as unknown as WebhookSender;
    const handed: unknown[] = [];
    let outcome: StreamOutcome = { kind: 'ack' };
    const streams: StreamDeliverer = {
      deliver: () => Promise.reject(new Error('a batch goes whole')),
      deliverBatch: async (target, b, _signal, options) => (handed.push({ target: target.id, b, options }), outcome),
    };
    const router = new SinkRouter(webhooks, streams).withEpoch(7);
    await expect(router.sendBatch(webhookTarget, batch, 'sub-w/0-1')).resolves.toEqual({ ok: true });
    expect(posted).toEqual([{ b: batch, messageId: 'sub-w/0-1' }]);
    await expect(router.sendBatch(streamTarget, batch, 'sub-s/0-1')).resolves.toEqual({ ok: true });
    expect(handed).toEqual([{ target: 'sub-s', b: batch, options: { epoch: 7 } }]);
    outcome = { kind: 'reject', reason: 'row 2 refused' };
    await expect(router.sendBatch(streamTarget, batch, 'sub-s/0-1')).resolves.toMatchObject({
      ok: false,
      rejected: true,
      error: 'rejected by the stream client: row 2 refused',
    });
  });
});

import type { OutBatch, WebhookResult, WebhookSender } from '@libs/delivery';
import type { EventFrame } from '@libs/frame';
import type { SubscriptionEntity } from '@libs/storage';
import { DeliveryOutcome, TRACING_OFF, TraceHeaders, Tracing } from '@libs/tracing';
import type { StreamDeliverer, StreamOutcome } from './stream-hub';

/**
 * Where a delivery goes, by the subscription's protocol: `HTTP` to its webhook, `STREAM` to its stream clients
 * (cluster-stream-router.ts: on whichever instance they are connected). Both answer in the same terms, so the
 * dispatch loop treats them alike. A stream delivery's id carries `epoch`, the fence epoch of the dispatching
 * run (a partition lease's, or the instance dispatch run's): {@link withEpoch} binds it per loop. Each attempt, to
 * either, is a delivery span when tracing is on (libs/tracing), child of the event's trace context; a webhook
 * request carries that span's context.
 */
export class SinkRouter {
  constructor(
    private readonly webhooks: WebhookSender,
    private readonly streams: StreamDeliverer,
    private readonly epoch = 0,
    private readonly tracing: Tracing = TRACING_OFF,
  ) {}

  /** The same router for a dispatch loop running under `epoch`. */
  withEpoch(epoch: number): SinkRouter {
    return new SinkRouter(this.webhooks, this.streams, epoch, this.tracing);
  }

  /** Not an async function: untraced, the sink's own promise is the answer (no wrapper on every delivery). */
  send(target: SubscriptionEntity, frame: EventFrame, messageId: string, signal?: AbortSignal): Promise<WebhookResult> {
    const webhook = target.protocol !== 'STREAM';
    const span = this.tracing.startDelivery(target, frame, webhook ? 'webhook' : 'stream');
    if (!span) return this.route(webhook, target, frame, messageId, signal);
    return this.traced(span, webhook, target, frame, messageId, signal);
  }

  /**
   * A batched subscription's events (libs/delivery/webhook-batch.ts): one request to its webhook, or one delivery to
   * a stream client (stream-hub.ts, `deliverBatch`); not traced.
   */
  sendBatch(
    target: SubscriptionEntity,
    batch: OutBatch,
    messageId: string,
    signal?: AbortSignal,
  ): Promise<WebhookResult> {
    if (target.protocol !== 'STREAM') return this.webhooks.sendBatch(target, batch, messageId, signal);
    return this.streams.deliverBatch(target, batch, signal, { epoch: this.epoch }).then(resultOf);
  }

  private async traced(
    span: NonNullable<ReturnType<Tracing['startDelivery']>>,
    webhook: boolean,
    target: SubscriptionEntity,
    frame: EventFrame,
    messageId: string,
    signal: AbortSignal | undefined,
  ): Promise<WebhookResult> {
    try {
      const result = await this.route(webhook, target, frame, messageId, signal, span.headers);
      span.end(outcomeOf(result), { status: result.status, error: result.error });
      return result;
    } catch (e) {
      span.end('failed', { error: e instanceof Error ? e.message : String(e) });
      throw e;
    }
  }

  private route(
    webhook: boolean,
    target: SubscriptionEntity,
    frame: EventFrame,
    messageId: string,
    signal: AbortSignal | undefined,
    trace?: TraceHeaders,
  ): Promise<WebhookResult> {
    return webhook ? this.webhooks.send(target, frame, messageId, signal, trace) : this.toStream(target, frame, signal);
  }

  private toStream(
    target: SubscriptionEntity,
    frame: EventFrame,
    signal: AbortSignal | undefined,
  ): Promise<WebhookResult> {
    return this.streams.deliver(target, frame, signal, { epoch: this.epoch }).then(resultOf);
  }
}

const ACKED: WebhookResult = Object.freeze({ ok: true });

/** A stream client's answer in the dispatch loop's terms. */
function resultOf(outcome: StreamOutcome): WebhookResult {
  switch (outcome.kind) {
    case 'ack':
      return ACKED;
    case 'nack':
      return { ok: false, error: 'nacked by the stream client', retryAfterMs: outcome.delayMs };
    case 'reject':
      return { ok: false, error: `rejected by the stream client: ${outcome.reason}`, rejected: true };
    case 'timeout':
      return { ok: false, error: 'no answer from the stream client within the ack timeout' };
    case 'gone':
      return { ok: false, error: 'the stream client disconnected', notAttempted: true };
  }
}

/** What an attempt came to, as its span says it. */
function outcomeOf(result: WebhookResult): DeliveryOutcome {
  if (result.ok) return 'delivered';
  if (result.notAttempted) return 'not-attempted';
  if (result.gone) return 'gone';
  if (result.rejected) return 'rejected';
  return 'failed';
}

import type { WebhookResult, WebhookSender } from '../delivery/webhook-sender';
import type { EventFrame } from '../frame';
import type { SubscriptionEntity } from '../storage';
import type { StreamDeliverer } from './stream-hub';

/**
 * Where a delivery goes, by the subscription's protocol: `HTTP` to its webhook, `STREAM` to its stream clients
 * (cluster-stream-router.ts: on whichever instance they are connected). Both answer in the same terms, so the
 * dispatch loop treats them alike. A stream delivery's id carries `epoch`, the fence epoch of the dispatching
 * run (a partition lease's, or the instance dispatch run's): {@link withEpoch} binds it per loop.
 */
export class SinkRouter {
  constructor(
    private readonly webhooks: WebhookSender,
    private readonly streams: StreamDeliverer,
    private readonly epoch = 0,
  ) {}

  /** The same router for a dispatch loop running under `epoch`. */
  withEpoch(epoch: number): SinkRouter {
    return new SinkRouter(this.webhooks, this.streams, epoch);
  }

  async send(target: SubscriptionEntity, frame: EventFrame, messageId: string, signal?: AbortSignal): Promise<WebhookResult> {
    if (target.protocol !== 'STREAM') return this.webhooks.send(target, frame, messageId, signal);
    const outcome = await this.streams.deliver(target, frame, signal, { epoch: this.epoch });
    switch (outcome.kind) {
      case 'ack':
        return { ok: true };
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
}

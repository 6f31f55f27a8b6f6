import type { WebhookResult, WebhookSender } from '../delivery/webhook-sender';
import type { EventFrame } from '../frame';
import type { SubscriptionEntity } from '../storage';
import type { StreamHub } from './stream-hub';

/**
 * Where a delivery goes, by the subscription's protocol: `HTTP` to its webhook, `STREAM` to the stream clients
 * connected to this process. Both answer in the same terms, so the dispatch loop treats them alike.
 */
export class SinkRouter {
  constructor(
    private readonly webhooks: WebhookSender,
    private readonly streams: StreamHub,
  ) {}

  async send(target: SubscriptionEntity, frame: EventFrame, messageId: string, signal?: AbortSignal): Promise<WebhookResult> {
    if (target.protocol !== 'STREAM') return this.webhooks.send(target, frame, messageId, signal);
    const outcome = await this.streams.deliver(target, frame, signal);
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

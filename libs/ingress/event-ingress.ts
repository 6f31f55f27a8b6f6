import type { EventFrame, RequestFrameAdaptor, InboundMessage } from '@libs/frame';
import type { EventProducer, PublishReceipt } from '@libs/kafka';
import type { TopicNamespace } from '@libs/topics';
import { TRACING_OFF, Tracing, TraceHeaders } from '@libs/tracing';

export interface PublishResult extends PublishReceipt {
  id: string;
}

/**
 * A request carrying events, with the adaptor of its protocol (libs/frame's registry picked it); `trace`, the
 * request's W3C trace context (its `traceparent` and `tracestate` headers, when valid: libs/tracing/trace-context.ts).
 */
export interface PublishRequest {
  adaptor: RequestFrameAdaptor;
  message: InboundMessage;
  trace?: TraceHeaders;
}

/**
 * Ingress: a publish request becomes frames through its adaptor and is written to Kafka; the answer waits for
 * the broker's acknowledgement. Topic policy: the name is the caller's tenant's (libs/topics): a shared topic, or
 * one of the tenant's own; any other is a 404, the audit topic a 403, and nothing is written. A batch is validated whole before anything is written, then written in
 * one produce request and reported whole: every event with its offset, or an error and no event claimed. Each
 * event's trace context is settled on the way (libs/tracing: its own `traceparent` extension, else the
 * request's), so it travels through Kafka in the `ce_traceparent` header.
 */
export class EventIngress {
  constructor(
    private readonly namespace: TopicNamespace,
    private readonly producer: EventProducer,
    readonly defaultTopic: string,
    private readonly maxBatchEvents: number,
    private readonly tracing: Tracing = TRACING_OFF,
  ) {}

  /**
   * Publishes to `topic` as `tenant` names it (the receipts name it so too). `amend` may add attributes to each
   * frame before it is written (request-reply sets its correlation id).
   */
  async publish(
    topic: string | undefined,
    tenant: string,
    request: PublishRequest,
    amend?: (frame: EventFrame) => void,
  ): Promise<PublishResult[]> {
    const name = topic ?? this.defaultTopic;
    // Never an A2A agent's request topic: it takes tasks only through the agent's A2A endpoints.
    const target = await this.namespace.resolve(tenant, name, 'publish');
    const frames = toFrames(request, this.maxBatchEvents);
    if (amend) frames.forEach(amend);
    const receipts = await this.tracing.publish(target, frames, request.trace, () =>
      this.producer.publishAll(target, frames),
    );
    return receipts.map((receipt, i) => ({ id: frames[i].id, ...receipt, topic: name }));
  }
}

/** The frames of a publish request, through the adaptor of its protocol. */
export function toFrames(request: PublishRequest, maxBatchEvents: number): EventFrame[] {
  return request.adaptor.decode(request.message, { maxBatchEvents });
}

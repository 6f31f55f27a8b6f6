import { ErrorCode, EventMeshError } from '../errors';
import { frameFromStructured } from '../frame';
import type { EventProducer, PublishReceipt, TopicAdmin } from '../kafka';

export interface PublishResult extends PublishReceipt {
  id: string;
}

/**
 * Ingress: a publish request becomes a frame through its adaptor and is written to Kafka; the answer waits for
 * the broker's acknowledgement. Topic policy: only the configured topics are served (created at boot); any
 * other topic is a 404 and nothing is written.
 */
export class EventIngress {
  constructor(
    private readonly topics: TopicAdmin,
    private readonly producer: EventProducer,
    readonly defaultTopic: string,
  ) {}

  async publishStructured(topic: string | undefined, body: unknown): Promise<PublishResult> {
    const target = topic ?? this.defaultTopic;
    if (!this.topics.isServed(target)) {
      throw new EventMeshError(ErrorCode.UnknownTopic, `topic "${target}" is not served by this runtime`, {
        topic: target,
      });
    }
    const frame = frameFromStructured(body);
    const receipt = await this.producer.publish(target, frame);
    return { id: frame.id, ...receipt };
  }
}

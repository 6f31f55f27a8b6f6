import { Kafka, Partitioners, Producer } from 'kafkajs';
import { ErrorCode, EventMeshError } from '../errors';
import { EventFrame, frameToKafkaMessage } from '../frame';

export interface PublishReceipt {
  topic: string;
  partition: number;
  offset: number;
}

/**
 * Writes frames to Kafka as binary-mode CloudEvents records and resolves only after the broker acknowledged them
 * from all in-sync replicas (acks = -1). Not idempotent and not transactional: Kafka is a durable log here.
 */
export class EventProducer {
  private readonly producer: Producer;

  constructor(kafka: Kafka) {
    this.producer = kafka.producer({
      allowAutoTopicCreation: false,
      createPartitioner: Partitioners.DefaultPartitioner,
      retry: { retries: 5 },
    });
  }

  async connect(): Promise<void> {
    await this.producer.connect();
  }

  async disconnect(): Promise<void> {
    await this.producer.disconnect();
  }

  async publish(topic: string, frame: EventFrame): Promise<PublishReceipt> {
    let metadata;
    try {
      metadata = await this.producer.send({ topic, acks: -1, messages: [frameToKafkaMessage(frame)] });
    } catch (e) {
      throw new EventMeshError(ErrorCode.KafkaUnavailable, `Kafka did not acknowledge the event: ${(e as Error).message}`,
        { topic }, true, { cause: e });
    }
    const [record] = metadata;
    return { topic, partition: record.partition, offset: Number(record.baseOffset ?? record.offset) };
  }
}

import { Kafka, Message, PartitionerArgs, Partitioners, Producer } from 'kafkajs';
import { ErrorCode, EventMeshError } from '../errors';
import { EventFrame, frameToKafkaMessage } from '../frame';
import type { TopicAdmin } from './topic-admin';

export interface PublishReceipt {
  topic: string;
  partition: number;
  offset: number;
}

export interface ProducerOptions {
  /** How long the first event of a batch waits for company before the batch goes out. */
  lingerMs: number;
  /** Most events in one produce request. */
  maxBatchEvents: number;
  /** Most bytes (keys, values, headers) in one produce request; a larger publish goes out alone. */
  maxBatchBytes?: number;
  /** Most produce requests awaiting their acknowledgement at once. */
  maxInFlight: number;
}

/** Below Kafka's default limit of a record batch (1 MiB), with room for the request's own framing. */
const DEFAULT_MAX_BATCH_BYTES = 900 * 1024;

function sizeOf(m: Message): number {
  let n = (m.value ? Buffer.byteLength(m.value as Buffer | string) : 0) + (m.key ? Buffer.byteLength(m.key as Buffer | string) : 0);
  for (const [k, v] of Object.entries(m.headers ?? {})) n += k.length + (v ? Buffer.byteLength(String(v)) : 0);
  return n;
}

/** One publish request's events: written in one produce request, never split, answered together. */
interface Unit {
  topic: string;
  messages: (Message & { partition: number })[];
  bytes: number;
  resolve(receipts: PublishReceipt[]): void;
  reject(e: unknown): void;
}

/**
 * Writes frames to Kafka as binary-mode CloudEvents records and resolves each publish only after the broker
 * acknowledged it from all in-sync replicas (acks = -1). Concurrent publishes are coalesced: they queue while a
 * produce request is in flight (or for `lingerMs` at most) and go out together in the next one, so many small
 * concurrent publishes cost one round trip per batch, not one each. Up to `maxInFlight` requests await their
 * acknowledgement at once. That orders nothing that was ordered before: a publisher that waits for its answer
 * before the next publish gets its events written in that order, and concurrent publishes carry no order to
 * keep. The events of one request (a batch) go out in one produce request, in their order. The producer is neither idempotent nor transactional: Kafka is a
 * durable log here, and a publisher that saw an error may retry with the same CloudEvents id.
 */
export class EventProducer {
  private readonly producer: Producer;
  private readonly partitioner = Partitioners.DefaultPartitioner();
  private queue: Unit[] = [];
  private queuedEvents = 0;
  private timer?: NodeJS.Timeout;
  private inFlight = 0;
  /** Produce requests sent and events they carried, since start. */
  readonly stats = { requests: 0, events: 0 };

  constructor(
    kafka: Kafka,
    private readonly topics: TopicAdmin,
    private readonly options: ProducerOptions,
  ) {
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
    return (await this.publishAll(topic, [frame]))[0];
  }

  /** Publishes the frames in one produce request; resolves with one receipt per frame, in order. */
  async publishAll(topic: string, frames: EventFrame[]): Promise<PublishReceipt[]> {
    let partitions: number[];
    try {
      partitions = await this.topics.partitionsOf(topic);
    } catch (e) {
      throw new EventMeshError(ErrorCode.KafkaUnavailable, `Kafka did not answer for topic "${topic}": ${(e as Error).message}`, { topic }, true, { cause: e });
    }
    const partitionMetadata = partitions.map((partitionId) => ({ partitionId, leader: 0 }));
    const messages = frames.map((frame) => {
      const message = frameToKafkaMessage(frame);
      const partition = this.partitioner({ topic, partitionMetadata, message } as PartitionerArgs);
      return { ...message, partition };
    });
    const bytes = messages.reduce((n, m) => n + sizeOf(m), 0);
    return new Promise<PublishReceipt[]>((resolve, reject) => {
      this.queue.push({ topic, messages, bytes, resolve, reject });
      this.queuedEvents += messages.length;
      this.schedule();
    });
  }

  /** `waited`: the queued events already waited for a request in flight, so they need no linger. */
  private schedule(waited = false): void {
    if (this.inFlight >= this.options.maxInFlight || this.queue.length === 0) return;
    if (waited || this.queuedEvents >= this.options.maxBatchEvents || this.options.lingerMs === 0) {
      this.flushSoon();
    } else {
      this.timer ??= setTimeout(() => this.flushSoon(), this.options.lingerMs);
    }
  }

  private flushSoon(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.inFlight >= this.options.maxInFlight || this.queue.length === 0) return;
    const batch: Unit[] = [];
    let events = 0;
    let bytes = 0;
    const maxBytes = this.options.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES;
    const fits = (unit: Unit) =>
      events + unit.messages.length <= this.options.maxBatchEvents && bytes + unit.bytes <= maxBytes;
    while (this.queue.length > 0 && (batch.length === 0 || fits(this.queue[0]))) {
      const unit = this.queue.shift()!;
      events += unit.messages.length;
      bytes += unit.bytes;
      batch.push(unit);
    }
    this.queuedEvents -= events;
    this.inFlight++;
    void this.send(batch).finally(() => {
      this.inFlight--;
      this.schedule(true);
    });
    this.schedule();
  }

  private async send(batch: Unit[]): Promise<void> {
    const byTopic = new Map<string, Message[]>();
    for (const unit of batch) {
      const list = byTopic.get(unit.topic) ?? [];
      list.push(...unit.messages);
      byTopic.set(unit.topic, list);
    }
    this.stats.requests++;
    this.stats.events += batch.reduce((n, u) => n + u.messages.length, 0);
    let metadata;
    try {
      metadata = await this.producer.sendBatch({
        acks: -1,
        topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
      });
    } catch (e) {
      const error = new EventMeshError(
        ErrorCode.KafkaUnavailable,
        `Kafka did not acknowledge the event(s): ${(e as Error).message}; some may have been written, retry with the same ids`,
        {},
        true,
        { cause: e },
      );
      batch.forEach((unit) => unit.reject(error));
      return;
    }
    // Within a topic partition, Kafka assigns consecutive offsets from baseOffset in the order sent.
    const next = new Map(metadata.map((m) => [`${m.topicName}#${m.partition}`, Number(m.baseOffset)]));
    for (const unit of batch) {
      try {
        unit.resolve(
          unit.messages.map((m) => {
            const k = `${unit.topic}#${m.partition}`;
            const offset = next.get(k);
            if (offset === undefined) throw new Error(`no acknowledgement for partition ${m.partition} of ${unit.topic}`);
            next.set(k, offset + 1);
            return { topic: unit.topic, partition: m.partition, offset };
          }),
        );
      } catch (e) {
        unit.reject(new EventMeshError(ErrorCode.KafkaUnavailable, (e as Error).message, { topic: unit.topic }, true));
      }
    }
  }
}

import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, Message, PartitionerArgs, Partitioners, Producer } from 'kafkajs';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { EventFrame, frameToKafkaMessage } from '@libs/frame';
import { installFastKafkajsEncoding } from '@libs/kafkajs-patches';
import type { TopicAdmin } from './topic-admin';
import { knownPartitioner } from './known-partitioner';

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
  /** Most events held (queued, or in a produce request not yet finished); a publish past it is refused at once. */
  maxHeldEvents: number;
  /** Most bytes held, as {@link maxHeldEvents}. */
  maxHeldBytes: number;
  /** Longest a publish waits for its acknowledgement, from the moment it is queued; then it fails. */
  publishTimeoutMs: number;
  /** How long the broker may wait for the in-sync replicas of a produce request. */
  ackTimeoutMs: number;
  /** The wait a refused publisher is told (Retry-After). */
  retryAfterSeconds: number;
  /** Hears of each produce request's events, bytes, duration and result (libs/metrics); absent: metrics are off. */
  metrics?: { produced(events: number, bytes: number, seconds: number, acked: boolean): void };
}

/** What the producer holds now, and what it refused: `/health` shows it (`stats.producer`). */
export interface ProducerDepth {
  /** Events and bytes held: queued, plus those in produce requests not yet finished. */
  events: number;
  bytes: number;
  queuedEvents: number;
  inFlightRequests: number;
  maxEvents: number;
  maxBytes: number;
  /** The most events and bytes ever held at once, since start. */
  peakEvents: number;
  peakBytes: number;
  /** Publishes refused at once because the queue was full (OVERLOADED). */
  shed: number;
  /** Publishes answered KAFKA_UNAVAILABLE because their acknowledgement did not come in time. */
  timedOut: number;
}

/** Below Kafka's default limit of a record batch (1 MiB), with room for the request's own framing. */
const DEFAULT_MAX_BATCH_BYTES = 900 * 1024;

function sizeOf(m: Message): number {
  let n =
    (m.value ? Buffer.byteLength(m.value as Buffer | string) : 0) +
    (m.key ? Buffer.byteLength(m.key as Buffer | string) : 0);
  const headers = m.headers;
  for (const k in headers) {
    const v = headers[k];
    n += k.length + (v ? (typeof v === 'string' ? Buffer.byteLength(v) : Buffer.byteLength(String(v))) : 0);
  }
  return n;
}

/** One publish request's events: written in one produce request, never split, answered together. */
interface Unit {
  topic: string;
  messages: (Message & { partition: number })[];
  bytes: number;
  /** `performance.now()` by which it is answered, acknowledged or not. */
  deadline: number;
  /** Answered (acknowledged, failed, or timed out); a later acknowledgement changes nothing. */
  done: boolean;
  resolve(receipts: PublishReceipt[]): void;
  reject(e: unknown): void;
}

/** How long a disconnect waits for the produce requests in flight. */
const DISCONNECT_WAIT_MS = 5000;

/**
 * Writes frames to Kafka as binary-mode CloudEvents records and resolves each publish only after the broker
 * acknowledged it from all in-sync replicas (acks = -1). Concurrent publishes are coalesced: they queue while a
 * produce request is in flight (or for `lingerMs` at most) and go out together in the next one, so many small
 * concurrent publishes cost one round trip per batch, not one each. Up to `maxInFlight` requests await their
 * acknowledgement at once. That orders nothing that was ordered before: a publisher that waits for its answer
 * before the next publish gets its events written in that order, and concurrent publishes carry no order to
 * keep. The events of one request (a batch) go out in one produce request, in their order. The producer is neither idempotent nor transactional: Kafka is a
 * durable log here, and a publisher that saw an error may retry with the same CloudEvents id.
 *
 * Backpressure: what the producer holds is bounded. A publish that would take the events or bytes held (queued,
 * or in a produce request not yet finished, answered or not) past `maxHeldEvents` / `maxHeldBytes` is refused at
 * once with OVERLOADED, nothing written. Every publish is answered within `publishTimeoutMs` of being queued: one
 * still queued then fails with KAFKA_UNAVAILABLE, not written (`maybeWritten: false`); one whose produce request
 * has not been acknowledged fails with KAFKA_UNAVAILABLE, `maybeWritten: true` (the broker may still write it: a
 * retry can duplicate, it is never claimed). Only an acknowledgement resolves a publish. One timer serves every
 * deadline (the oldest pending), so the bookkeeping per publish is a time stamp and two counters.
 */
export class EventProducer {
  private readonly producer: Producer;
  private readonly partitioner = Partitioners.DefaultPartitioner();
  private queue: Unit[] = [];
  private queuedEvents = 0;
  private timer?: NodeJS.Timeout;
  /** Produce requests not yet finished, oldest first (their units are older than any queued one), each with its send. */
  private readonly sending = new Map<Unit[], Promise<void>>();
  private heldEvents = 0;
  private heldBytes = 0;
  private expiryTimer?: NodeJS.Timeout;
  private readonly depthStats = { peakEvents: 0, peakBytes: 0, shed: 0, timedOut: 0 };
  /** Produce requests sent and events they carried, since start. */
  readonly stats = { requests: 0, events: 0 };

  constructor(
    kafka: Kafka,
    private readonly topics: TopicAdmin,
    private readonly options: ProducerOptions,
  ) {
    // Records cost the gateway most of its CPU per event in kafkajs's encoder; this writes the same bytes for less.
    installFastKafkajsEncoding();
    this.producer = kafka.producer({
      allowAutoTopicCreation: false,
      // Bounded by the client's request timeout per attempt; the answer to the publisher is bounded by
      // publishTimeoutMs whatever the retries take.
      createPartitioner: knownPartitioner,
      retry: { retries: 5 },
    });
  }

  async connect(): Promise<void> {
    await this.producer.connect();
  }

  /**
   * Waits for the produce requests in flight (their publishers were answered by their deadline already), at most
   * `DISCONNECT_WAIT_MS`, then disconnects. kafkajs goes on retrying a request whose producer disconnected (it
   * connects again for it), so a request left in flight would outlive the producer.
   */
  async disconnect(): Promise<void> {
    clearTimeout(this.expiryTimer);
    if (this.sending.size > 0)
      await Promise.race([
        Promise.allSettled(this.sending.values()),
        sleep(DISCONNECT_WAIT_MS, undefined, { ref: false }),
      ]);
    await this.producer.disconnect();
  }

  depth(): ProducerDepth {
    return {
      events: this.heldEvents,
      bytes: this.heldBytes,
      queuedEvents: this.queuedEvents,
      inFlightRequests: this.sending.size,
      maxEvents: this.options.maxHeldEvents,
      maxBytes: this.options.maxHeldBytes,
      ...this.depthStats,
    };
  }

  async publish(topic: string, frame: EventFrame): Promise<PublishReceipt> {
    return (await this.publishAll(topic, [frame]))[0];
  }

  /** Publishes the frames in one produce request; resolves with one receipt per frame, in order. */
  async publishAll(topic: string, frames: EventFrame[]): Promise<PublishReceipt[]> {
    const partitions = this.topics.knownPartitionsOf(topic) ?? (await this.lookUpPartitions(topic));
    const partitionMetadata = partitions.map((partitionId) => ({ partitionId, leader: 0 }));
    const messages: (Message & { partition: number })[] = new Array(frames.length);
    let bytes = 0;
    for (let i = 0; i < frames.length; i++) {
      const message = frameToKafkaMessage(frames[i]) as Message & { partition: number };
      message.partition = this.partitioner({ topic, partitionMetadata, message } as PartitionerArgs);
      messages[i] = message;
      bytes += sizeOf(message);
    }
    // The shed check: an empty producer takes any publish (the config keeps the caps above one request).
    if (
      this.heldEvents > 0 &&
      (this.heldEvents + messages.length > this.options.maxHeldEvents ||
        this.heldBytes + bytes > this.options.maxHeldBytes)
    ) {
      this.depthStats.shed++;
      throw new EventMeshError(
        ErrorCode.Overloaded,
        `the gateway holds ${this.heldEvents} events (${this.heldBytes} bytes) for Kafka, its most; nothing was written, publish again later`,
        {
          limit: 'producerQueue',
          heldEvents: this.heldEvents,
          heldBytes: this.heldBytes,
          retryAfterSeconds: this.options.retryAfterSeconds,
        },
        true,
      );
    }
    this.heldEvents += messages.length;
    this.heldBytes += bytes;
    if (this.heldEvents > this.depthStats.peakEvents) this.depthStats.peakEvents = this.heldEvents;
    if (this.heldBytes > this.depthStats.peakBytes) this.depthStats.peakBytes = this.heldBytes;
    return new Promise<PublishReceipt[]>((resolve, reject) => {
      this.queue.push({
        topic,
        messages,
        bytes,
        deadline: performance.now() + this.options.publishTimeoutMs,
        done: false,
        resolve,
        reject,
      });
      this.queuedEvents += messages.length;
      this.schedule();
      this.expiryTimer ??= this.armExpiry();
    });
  }

  /** A topic's partitions when none are known yet, within the publish deadline. */
  private async lookUpPartitions(topic: string): Promise<number[]> {
    let timer: NodeJS.Timeout | undefined;
    const ms = this.options.publishTimeoutMs;
    try {
      return await Promise.race([
        this.topics.partitionsOf(topic),
        new Promise<never>(
          (_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)),
        ),
      ]);
    } catch (e) {
      throw new EventMeshError(
        ErrorCode.KafkaUnavailable,
        `Kafka did not answer for topic "${topic}": ${(e as Error).message}; nothing was written`,
        { topic, maybeWritten: false, retryAfterSeconds: this.options.retryAfterSeconds },
        true,
        { cause: e },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  /** The timer for the oldest pending publish's deadline, if any is pending. */
  private armExpiry(): NodeJS.Timeout | undefined {
    let next: number | undefined;
    for (const batch of this.sending.keys()) {
      const unit = batch.find((u) => !u.done);
      if (unit) {
        next = unit.deadline;
        break;
      }
    }
    next ??= this.queue[0]?.deadline;
    if (next === undefined) return undefined;
    const timer = setTimeout(this.expire, Math.max(0, next - performance.now()) + 1);
    timer.unref();
    return timer;
  }

  /** Answers every publish whose deadline passed: unsent ones are dropped from the queue. */
  private readonly expire = (): void => {
    this.expiryTimer = undefined;
    const now = performance.now();
    for (const batch of this.sending.keys()) {
      for (const unit of batch) {
        if (unit.done || unit.deadline > now) continue;
        unit.done = true;
        this.depthStats.timedOut++;
        unit.reject(
          new EventMeshError(
            ErrorCode.KafkaUnavailable,
            `Kafka did not acknowledge the event(s) within ${this.options.publishTimeoutMs} ms; they may still be written, retry with the same ids`,
            { maybeWritten: true, retryAfterSeconds: this.options.retryAfterSeconds },
            true,
          ),
        );
      }
    }
    while (this.queue.length > 0 && this.queue[0].deadline <= now) {
      const unit = this.queue.shift()!;
      unit.done = true;
      this.queuedEvents -= unit.messages.length;
      this.heldEvents -= unit.messages.length;
      this.heldBytes -= unit.bytes;
      this.depthStats.timedOut++;
      unit.reject(
        new EventMeshError(
          ErrorCode.KafkaUnavailable,
          `Kafka took no produce request for ${this.options.publishTimeoutMs} ms; nothing was written, publish again`,
          { maybeWritten: false, retryAfterSeconds: this.options.retryAfterSeconds },
          true,
        ),
      );
    }
    this.expiryTimer = this.armExpiry();
  };

  /** `waited`: the queued events already waited for a request in flight, so they need no linger. */
  private schedule(waited = false): void {
    if (this.sending.size >= this.options.maxInFlight || this.queue.length === 0) return;
    if (waited || this.queuedEvents >= this.options.maxBatchEvents || this.options.lingerMs === 0) {
      this.flushSoon();
    } else {
      this.timer ??= setTimeout(() => this.flushSoon(), this.options.lingerMs);
    }
  }

  private flushSoon(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.sending.size >= this.options.maxInFlight || this.queue.length === 0) return;
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
    const sent: Promise<void> = this.send(batch).finally(() => {
      this.sending.delete(batch);
      this.heldEvents -= events;
      this.heldBytes -= bytes;
      this.schedule(true);
    });
    this.sending.set(batch, sent);
    this.schedule();
  }

  private async send(batch: Unit[]): Promise<void> {
    const byTopic = new Map<string, Message[]>();
    for (const unit of batch) {
      const list = byTopic.get(unit.topic) ?? [];
      list.push(...unit.messages);
      byTopic.set(unit.topic, list);
    }
    const events = batch.reduce((n, u) => n + u.messages.length, 0);
    this.stats.requests++;
    this.stats.events += events;
    const metrics = this.options.metrics;
    const started = metrics ? performance.now() : 0;
    const measured = (acked: boolean) =>
      metrics?.produced(
        events,
        batch.reduce((n, u) => n + u.bytes, 0),
        (performance.now() - started) / 1000,
        acked,
      );
    let metadata;
    try {
      metadata = await this.producer.sendBatch({
        acks: -1,
        timeout: this.options.ackTimeoutMs,
        topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
      });
      measured(true);
    } catch (e) {
      measured(false);
      const error = new EventMeshError(
        ErrorCode.KafkaUnavailable,
        `Kafka did not acknowledge the event(s): ${(e as Error).message}; some may have been written, retry with the same ids`,
        { maybeWritten: true, retryAfterSeconds: this.options.retryAfterSeconds },
        true,
        { cause: e },
      );
      for (const unit of batch) {
        unit.done = true;
        unit.reject(error);
      }
      return;
    }
    // Within a topic partition, Kafka assigns consecutive offsets from baseOffset in the order sent.
    const next = new Map(metadata.map((m) => [`${m.topicName}#${m.partition}`, Number(m.baseOffset)]));
    for (const unit of batch) {
      const late = unit.done;
      unit.done = true;
      try {
        const receipts = unit.messages.map((m) => {
          const k = `${unit.topic}#${m.partition}`;
          const offset = next.get(k);
          if (offset === undefined) throw new Error(`no acknowledgement for partition ${m.partition} of ${unit.topic}`);
          next.set(k, offset + 1);
          return { topic: unit.topic, partition: m.partition, offset };
        });
        // Answered already (its deadline passed): the offsets still advance for the units after it.
        if (!late) unit.resolve(receipts);
      } catch (e) {
        unit.reject(new EventMeshError(ErrorCode.KafkaUnavailable, (e as Error).message, { topic: unit.topic }, true));
      }
    }
  }
}

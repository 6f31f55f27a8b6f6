import type { Admin, Kafka, Producer } from 'kafkajs';
import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '@libs/config';
import { randomUUID } from 'node:crypto';
import { Deliverer, DispatchLoop, DispatchLoopOptions, DispatchProgress, WebhookSender } from '@libs/delivery';
import { createKafka, createTopicsAndWait, PartitionReader, TopicAdmin } from '@libs/kafka';
import {
  createDataSource,
  DeadLetterStore,
  DispatchRunStore,
  OffsetStore,
  RetryStore,
  SkippedRangeStore,
  SubscriptionEntity,
} from '@libs/storage';
import { SubscriptionService } from '@libs/subscriptions';
import { testConfig } from './env';

/** What a delivering instance's dispatch loop is built from, on real Postgres and Kafka: for integration specs of the loop. */
export interface DeliveryStack {
  config: EventMeshConfig;
  db: DataSource;
  kafka: Kafka;
  admin: Admin;
  producer: Producer;
  topics: TopicAdmin;
  webhooks: WebhookSender;
  runs: DispatchRunStore;
  offsets: OffsetStore;
  deadLetters: DeadLetterStore;
  retries: RetryStore;
  subscriptions: SubscriptionService;
  /** Closes everything above and deletes the topic. */
  close(): Promise<void>;
}

/** Opens the stores and clients, and creates `topic` with `partitions` partitions. */
export async function openDeliveryStack(
  name: string,
  topic: string,
  partitions: number,
  webhookTimeoutMs: number,
): Promise<DeliveryStack> {
  const config = testConfig({ EVENTMESH_KAFKA_TOPICS: topic });
  const db = createDataSource(config.postgres, name);
  await db.initialize();
  const kafka = createKafka(config.kafka, name);
  const admin = kafka.admin();
  await admin.connect();
  await createTopicsAndWait(admin, [{ topic, numPartitions: partitions, replicationFactor: 1 }]);
  const producer = kafka.producer();
  await producer.connect();
  const topics = new TopicAdmin(kafka, config.kafka);
  await topics.connect();
  const webhooks = WebhookSender.forInstance(
    testConfig({ EVENTMESH_DELIVERY_WEBHOOK_TIMEOUT_MS: String(webhookTimeoutMs) }),
  );
  const deadLetters = new DeadLetterStore(db);
  return {
    config,
    db,
    kafka,
    admin,
    producer,
    topics,
    webhooks,
    runs: new DispatchRunStore(db, 2000),
    offsets: new OffsetStore(db),
    deadLetters,
    retries: new RetryStore(db, deadLetters),
    subscriptions: SubscriptionService.forInstance(db, topics, config),
    async close() {
      await webhooks.close();
      await topics.disconnect();
      await producer.disconnect();
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect();
      await db.destroy();
    },
  };
}

/** The stack's dispatch loop of `instanceId` under `epoch` of its dispatch run, with short polls and retries. */
export function dispatchLoopOf(
  stack: DeliveryStack,
  reader: PartitionReader,
  instanceId: string,
  epoch: number,
  sender: Deliverer,
  options: Partial<DispatchLoopOptions> = {},
): DispatchLoop {
  return new DispatchLoop({
    instanceId,
    subscriptions: stack.subscriptions,
    offsets: stack.offsets,
    deadLetters: stack.deadLetters,
    retries: stack.retries,
    skipped: new SkippedRangeStore(stack.db),
    reader,
    topics: stack.topics,
    sender,
    fence: stack.runs.fenceFor(instanceId, epoch),
    options: {
      pollMaxWaitMs: 100,
      batchMaxEvents: 100,
      refreshIntervalMs: 200,
      retryInitialMs: 10,
      retryMaxMs: 20,
      maxAttempts: 50,
      ...options,
    },
  });
}

/**
 * A webhook subscription to `sink` on the stack's one-partition `topic`, from the end of the log, held by an instance
 * of its own (`<label>-…`) whose dispatch loop is running, delivering through the stack's webhook sender.
 */
export async function webhookSubscriptionFromEnd(
  stack: DeliveryStack,
  reader: PartitionReader,
  topic: string,
  sink: string,
  label: string,
  config: Record<string, unknown> = {},
) {
  const instanceId = `${label}-${randomUUID().slice(0, 8)}`;
  const id = randomUUID();
  await stack.db.manager.insert(SubscriptionEntity, {
    id,
    topic,
    protocol: 'HTTP',
    sink,
    instanceId,
    status: 'ACTIVE',
    config: config as never,
  });
  const from = (await stack.topics.endOffsets(topic)).get(0)!;
  await stack.offsets.commit([{ subscriptionId: id, topic, partition: 0, nextOffset: from, epoch: 0 }]);
  const epoch = await stack.runs.claim(instanceId, `${label} spec`);
  const sender: Deliverer = {
    send: (target, frame, messageId, signal) => stack.webhooks.send(target, frame, messageId, signal),
  };
  const loop = dispatchLoopOf(stack, reader, instanceId, epoch, sender);
  const abort = new AbortController();
  let progress: DispatchProgress | undefined;
  const running = loop.run(abort.signal, Date.now() + 60000, (p) => (progress = p));
  const stop = () => (abort.abort(), running.catch(() => undefined));
  return { id, from, progress: () => progress, stop };
}

import type { Admin, Kafka, Producer } from 'kafkajs';
import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '../../libs/config';
import { WebhookSender } from '../../libs/delivery';
import { createKafka, createTopicsAndWait, TopicAdmin } from '../../libs/kafka';
import { createDataSource, DeadLetterStore, DispatchRunStore, OffsetStore, RetryStore } from '../../libs/storage';
import { SubscriptionService } from '../../libs/subscriptions';
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

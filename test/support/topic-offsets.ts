import { ConfigResourceTypes, type Kafka } from 'kafkajs';
import type { TopicAdmin } from '@libs/kafka';

/** The sum of a topic's end offsets: how many records were ever written to it (a refused publish adds none). */
export async function topicEndOffset(kafka: Kafka, topic: string): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return (await admin.fetchTopicOffsets(topic)).reduce((sum, p) => sum + Number(p.high), 0);
  } finally {
    await admin.disconnect();
  }
}

/** How many events a topic holds now (its end offsets less its start offsets): a deleted event counts no more. */
export async function storedEvents(topics: TopicAdmin, topic: string): Promise<number> {
  const [starts, ends] = await Promise.all([topics.startOffsets(topic), topics.endOffsets(topic)]);
  return [...ends].reduce((n, [p, end]) => n + end - starts.get(p)!, 0);
}

/** The names of the topics Kafka has. */
export async function kafkaTopicNames(kafka: Kafka): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await admin.listTopics();
  } finally {
    await admin.disconnect();
  }
}

/** A topic as Kafka has it: its partition count (metadata) and its `retention.ms` (describeConfigs). */
export async function kafkaTopicSettings(
  kafka: Kafka,
  topic: string,
): Promise<{ partitions: number; retentionMs: string | undefined }> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms'] }],
    });
    return {
      partitions: topics[0].partitions.length,
      retentionMs: resources[0].configEntries.find((e) => e.configName === 'retention.ms')?.configValue,
    };
  } finally {
    await admin.disconnect();
  }
}

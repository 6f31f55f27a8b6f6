import type { Kafka } from 'kafkajs';
import type { TopicAdmin } from '../../libs/kafka';

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

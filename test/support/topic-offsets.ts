import type { Kafka } from 'kafkajs';

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

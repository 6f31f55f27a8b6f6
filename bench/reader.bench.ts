import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Kafka, logLevel } from 'kafkajs';
import { createKafka, createTopicsAndWait, PartitionReader } from '@libs/kafka';
import { benchConfig } from './support';

/**
 * Reading Kafka without a consumer group: the runtime's PartitionReader (Fetch requests to the leaders at offsets
 * the caller chooses) against a kafkajs consumer in a fresh group reading from the beginning, on the same topic
 * in the same run. Measures the time to the first record (connect, and for the consumer the group join) and the
 * throughput of reading everything. `npm run bench:reader` (BENCH_EVENTS changes the size).
 */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 60000);
const PARTITIONS = 6;

async function main(): Promise<void> {
  const config = benchConfig();
  const kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench-reader', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const topic = `bench-reader-${randomUUID().slice(0, 8)}`;
  await createTopicsAndWait(admin, [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }]);
  const producer = kafka.producer();
  await producer.connect();
  const value = Buffer.alloc(1024, 120);
  for (let sent = 0; sent < EVENTS; sent += 1000) {
    await producer.sendBatch({
      acks: -1,
      topicMessages: [{ topic, messages: Array.from({ length: 1000 }, (_, i) => ({ key: `k${sent + i}`, value })) }],
    });
  }
  await producer.disconnect();

  // The runtime's reader: every partition from offset 0 until the end.
  let started = performance.now();
  const reader = new PartitionReader(createKafka(config.kafka, 'bench-reader'));
  await reader.connect();
  const positions = new Map(Array.from({ length: PARTITIONS }, (_, p) => [p, 0]));
  let read = 0;
  let firstAt = 0;
  while (read < EVENTS) {
    const fetched = await reader.fetch(
      [...positions].map(([partition, offset]) => ({ topic, partition, offset })),
      { maxWaitMs: 100 },
    );
    for (const f of fetched) {
      if (f.records.length === 0) continue;
      if (!firstAt) firstAt = performance.now() - started;
      read += f.records.length;
      positions.set(f.partition, f.records[f.records.length - 1].offset + 1);
    }
  }
  const ours = { firstMs: firstAt, seconds: (performance.now() - started) / 1000 };
  await reader.disconnect();

  // A kafkajs consumer in a new group, from the beginning.
  started = performance.now();
  const consumer = kafka.consumer({ groupId: `bench-reader-${randomUUID()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let consumed = 0;
  let consumerFirst = 0;
  await new Promise<void>((resolve) => {
    void consumer.run({
      eachBatch: async ({ batch }) => {
        if (!consumerFirst) consumerFirst = performance.now() - started;
        consumed += batch.messages.length;
        if (consumed >= EVENTS) resolve();
      },
    });
  });
  const theirs = { firstMs: consumerFirst, seconds: (performance.now() - started) / 1000 };
  await consumer.disconnect();
  await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await admin.disconnect();

  console.log(`\nreader benchmark: ${EVENTS} records of 1 KiB in ${PARTITIONS} partitions, read from offset 0`);
  console.log(
    `machine: ${os.cpus().length} cores (${os.cpus()[0].model}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; everything on one host\n`,
  );
  console.log('| reader | first record ms | total s | records/s |');
  console.log('|---|---|---|---|');
  console.log(
    `| PartitionReader (no group) | ${ours.firstMs.toFixed(0)} | ${ours.seconds.toFixed(2)} | ${(EVENTS / ours.seconds).toFixed(0)} |`,
  );
  console.log(
    `| kafkajs consumer, new group | ${theirs.firstMs.toFixed(0)} | ${theirs.seconds.toFixed(2)} | ${(EVENTS / theirs.seconds).toFixed(0)} |`,
  );
  console.log(
    `\nthroughput ratio: ${(theirs.seconds / ours.seconds).toFixed(2)}x; first record ${(theirs.firstMs - ours.firstMs).toFixed(0)} ms sooner`,
  );
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);

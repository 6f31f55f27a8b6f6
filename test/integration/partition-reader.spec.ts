import type { Admin, Kafka, Producer } from 'kafkajs';
import { createKafka, createTopicsAndWait, PartitionReader } from '@libs/kafka';
import { kafkaFaultListener, testConfig, uniqueTopic } from '../support/env';
import { TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait-for';

describe('PartitionReader (real Kafka)', () => {
  const config = testConfig();
  const topic = uniqueTopic('reader');
  let kafka: Kafka;
  let admin: Admin;
  let producer: Producer;
  let reader: PartitionReader;
  let groupsBefore: string[];

  beforeAll(async () => {
    kafka = createKafka(config.kafka, 'reader-spec');
    admin = kafka.admin();
    await admin.connect();
    groupsBefore = (await admin.listGroups()).groups.map((g) => g.groupId);
    await createTopicsAndWait(admin, [{ topic, numPartitions: 2, replicationFactor: 1 }]);
    producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic,
      acks: -1,
      messages: [
        ...Array.from({ length: 10 }, (_, i) => ({ partition: 0, value: `p0-${i}`, headers: { n: String(i) } })),
        ...Array.from({ length: 3 }, (_, i) => ({ partition: 1, value: `p1-${i}` })),
      ],
    });
    reader = new PartitionReader(kafka);
    await reader.connect();
  });

  afterAll(async () => {
    await reader.disconnect();
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });

  it('reads chosen partitions from chosen offsets', async () => {
    const fetched = await reader.fetch(
      [
        { topic, partition: 0, offset: 4 },
        { topic, partition: 1, offset: 0 },
      ],
      { maxWaitMs: 100 },
    );
    const byPartition = new Map(fetched.map((f) => [f.partition, f]));
    expect(byPartition.get(0)!.records.map((r) => [r.offset, r.value!.toString()])).toEqual(
      [4, 5, 6, 7, 8, 9].map((i) => [i, `p0-${i}`]),
    );
    expect(byPartition.get(0)!.records[0].headers.n!.toString()).toBe('4');
    expect(byPartition.get(0)!.highWatermark).toBe(10);
    expect(byPartition.get(1)!.records.map((r) => r.value!.toString())).toEqual(['p1-0', 'p1-1', 'p1-2']);
    expect(byPartition.get(1)!.highWatermark).toBe(3);
  });

  it("brings at most a position's maxBytes of its partition, the reader's 1 MiB without it", async () => {
    const sized = uniqueTopic('reader-bytes');
    await createTopicsAndWait(admin, [{ topic: sized, numPartitions: 1, replicationFactor: 1 }]);
    // 20 record batches of 10 KB each (one send each).
    for (let i = 0; i < 20; i++)
      await producer.send({ topic: sized, acks: -1, messages: [{ value: Buffer.alloc(10_000, i) }] });
    const [capped] = await reader.fetch([{ topic: sized, partition: 0, offset: 0, maxBytes: 32 * 1024 }], {
      maxWaitMs: 100,
    });
    expect(capped.records.map((r) => r.offset)).toEqual([0, 1, 2]);
    const [whole] = await reader.fetch([{ topic: sized, partition: 0, offset: 0 }], { maxWaitMs: 100 });
    expect(whole.records).toHaveLength(20);
    await admin.deleteTopics({ topics: [sized] }).catch(() => undefined);
  });

  it('returns no records at the end of a partition', async () => {
    const [p] = await reader.fetch([{ topic, partition: 1, offset: 3 }], { maxWaitMs: 50 });
    expect(p.records).toEqual([]);
    expect(p.outOfRange).toBeUndefined();
  });

  it('flags an offset past the end as out of range and still serves the other partitions', async () => {
    const fetched = await reader.fetch(
      [
        { topic, partition: 0, offset: 500 },
        { topic, partition: 1, offset: 1 },
      ],
      { maxWaitMs: 50 },
    );
    const byPartition = new Map(fetched.map((f) => [f.partition, f]));
    expect(byPartition.get(0)!.outOfRange).toBe(true);
    expect(byPartition.get(1)!.records.map((r) => r.offset)).toEqual([1, 2]);
  });

  it('drops a connection whose fetch timed out (a link that went silent) and reads through a new one', async () => {
    const faults = kafkaFaultListener();
    // The broker's fault listener (by default 127.0.0.1:9094) advertises the port after it: a reader that bootstraps at the proxy
    // there sends every request through it, and the proxy black-holes the connections open when it strands them.
    const proxy = new TcpProxy(faults.host, faults.port, faults.advertisedPort);
    await proxy.start();
    const viaProxy = new PartitionReader(
      createKafka({ ...config.kafka, brokers: [proxy.address], requestTimeoutMs: 1000 }, 'reader-spec-stranded'),
    );
    try {
      await viaProxy.connect();
      const read = () => viaProxy.fetch([{ topic, partition: 1, offset: 0 }], { maxWaitMs: 0 });
      expect((await read())[0].records).toHaveLength(3);
      const connectionsBefore = proxy.counters.connections;
      proxy.strand();
      // Nothing answers on the connection the reader holds: the fetch times out (the request timeout, 1 s)...
      await expect(read()).rejects.toThrow(/timed out/);
      // ...the silent connection is dropped (libs/kafka/silent-links.ts), and a fetch goes through a new one.
      await waitFor(
        'a fetch answered through a new connection',
        async () => ((await read().catch(() => []))[0]?.records.length ?? 0) === 3,
        { timeoutMs: 60000 },
      );
      expect(proxy.counters.connections).toBeGreaterThan(connectionsBefore);
    } finally {
      await viaProxy.disconnect().catch(() => undefined);
      await proxy.stop();
    }
  }, 120000);

  it('leaves no consumer group and no committed offset in Kafka', async () => {
    const groupsAfter = (await admin.listGroups()).groups.map((g) => g.groupId);
    expect(groupsAfter.filter((g) => !groupsBefore.includes(g))).toEqual([]);
  });
});

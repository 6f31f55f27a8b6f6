import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Kafka, logLevel, Message, Partitioners } from 'kafkajs';
import { Pool } from 'undici';
import { frameToKafkaMessage } from '../libs/frame';
import { benchConfig, benchEnv, brokerPid, meterCpu, printTable, RunResult, startInstanceProcess, summarize } from './support';

/**
 * Publish throughput and latency: HTTP `POST /events/publish` through a real instance process against two raw
 * kafkajs baselines on the same broker, in the same run:
 *   (a) one `send()` per event at the same concurrency (what a user without the runtime would write),
 *   (b) `sendBatch` of 500 events at a time (close to what the client and broker can do).
 * 1 KiB events, 64 concurrent clients, acks from all in-sync replicas. `npm run bench:publish`
 * (BENCH_EVENTS, BENCH_CONCURRENCY to change the size).
 */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const WARMUP = Math.min(2000, Math.floor(EVENTS / 5));
const DATA = 'x'.repeat(1024);

function event(n: number) {
  return { specversion: '1.0', id: randomUUID(), source: '/bench', type: 'bench.published', partitionkey: `k${n % 97}`, data: DATA };
}

async function pool(total: number, concurrency: number, task: (n: number) => Promise<void>): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const n = next++;
        const t0 = process.hrtime.bigint();
        await task(n);
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }),
  );
  return latencies;
}

async function viaHttp(url: string, gatewayPid: number | undefined, topic: string, total: number): Promise<RunResult> {
  // undici's pool: keep-alive connections, one per concurrent client, and little client-side CPU per request.
  const client = new Pool(url, { connections: CONCURRENCY, pipelining: 1 });
  const path = `/events/publish?topic=${topic}`;
  const post = async (body: string) => {
    const { statusCode, body: response } = await client.request({
      path,
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body,
    });
    await response.dump();
    if (statusCode !== 202) throw new Error(`HTTP ${statusCode}`);
  };
  await pool(WARMUP, CONCURRENCY, (n) => post(JSON.stringify(event(n))));
  const cpu = meterCpu({ client: 'self', gateway: gatewayPid, broker: brokerPid() });
  const started = process.hrtime.bigint();
  const latencies = await pool(total, CONCURRENCY, (n) => post(JSON.stringify(event(n))));
  const result = { ...summarize('eventmesh HTTP publish', total, started, latencies), cpu: cpu() };
  await client.close();
  return result;
}

function rawMessage(n: number): Message {
  const e = event(n);
  return frameToKafkaMessage({ id: e.id, source: e.source, type: e.type, specversion: '1.0', datacontenttype: 'application/json',
    extensions: { partitionkey: e.partitionkey }, data: Buffer.from(JSON.stringify(e.data)) });
}

async function main(): Promise<void> {
  const topic = `bench-publish-${randomUUID().slice(0, 8)}`;
  const config = benchConfig({ EVENTMESH_KAFKA_TOPICS: topic });
  const kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 6, replicationFactor: 1 }] });

  const instance = await startInstanceProcess(
    benchEnv({ EVENTMESH_KAFKA_TOPICS: topic, EVENTMESH_INSTANCE_ROLES: 'gateway', EVENTMESH_HTTP_PORT: '0', EVENTMESH_INSTANCE_ID: 'bench-publish' }),
  );
  const results: RunResult[] = [];
  try {
    results.push(await viaHttp(instance.url, instance.child.pid, topic, EVENTS));
  } finally {
    await instance.stop();
  }

  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  await pool(WARMUP, CONCURRENCY, async (n) => void (await producer.send({ topic, acks: -1, messages: [rawMessage(n)] })));
  let cpu = meterCpu({ client: 'self', broker: brokerPid() });
  let started = process.hrtime.bigint();
  const latencies = await pool(EVENTS, CONCURRENCY, async (n) => void (await producer.send({ topic, acks: -1, messages: [rawMessage(n)] })));
  results.push({ ...summarize('(a) kafkajs send() per event', EVENTS, started, latencies), cpu: cpu() });

  cpu = meterCpu({ client: 'self', broker: brokerPid() });
  started = process.hrtime.bigint();
  for (let sent = 0; sent < EVENTS; sent += 500) {
    const size = Math.min(500, EVENTS - sent);
    await producer.sendBatch({ acks: -1, topicMessages: [{ topic, messages: Array.from({ length: size }, (_, i) => rawMessage(sent + i)) }] });
  }
  results.push({ ...summarize('(b) kafkajs sendBatch of 500', EVENTS, started), cpu: cpu() });
  await producer.disconnect();
  await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await admin.disconnect();

  console.log(`\npublish benchmark: ${EVENTS} events of 1 KiB, ${CONCURRENCY} concurrent clients, acks=-1, topic of 6 partitions`);
  console.log(`machine: ${os.cpus().length} cores (${os.cpus()[0].model}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; everything on one host\n`);
  printTable(results);
  const [ours, a, b] = results;
  console.log(`\nratio vs (a) per-event send: ${(ours.perSecond / a.perSecond).toFixed(2)}x (goal >= 1.0x)`);
  console.log(`ratio vs (b) batches of 500: ${(ours.perSecond / b.perSecond).toFixed(2)}x (goal >= 0.5x)`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

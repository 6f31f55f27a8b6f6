import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Kafka, logLevel, Message, Partitioners, Producer } from 'kafkajs';
import { Pool } from 'undici';
import { frameToKafkaMessage } from '../libs/frame';
import { benchConfig, benchEnv, brokerPid, meterCpu, printTable, RunResult, startInstanceProcess, summarize } from './support';

/**
 * Publish throughput and latency: HTTP `POST /events/publish` through a real instance process against two raw
 * kafkajs baselines on the same broker, in the same run:
 *   (a) one `send()` per event at the same concurrency (what a user without the runtime would write),
 *   (b) `sendBatch` of 500 events at a time (close to what the client and broker can do).
 * 1 KiB events, 64 concurrent clients, acks from all in-sync replicas. `npm run bench:publish`
 * (BENCH_EVENTS, BENCH_CONCURRENCY, BENCH_ROUNDS to change the size). The paths take turns for BENCH_ROUNDS rounds
 * (default 3); the figures are each path's median round.
 */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
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

async function viaHttp(name: string, url: string, gatewayPid: number | undefined, topic: string, total: number): Promise<RunResult> {
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
  const result = { ...summarize(name, total, started, latencies), cpu: cpu() };
  await client.close();
  return result;
}

function rawMessage(n: number): Message {
  const e = event(n);
  return frameToKafkaMessage({ id: e.id, source: e.source, type: e.type, specversion: '1.0', datacontenttype: 'application/json',
    extensions: { partitionkey: e.partitionkey }, data: Buffer.from(JSON.stringify(e.data)) });
}

/** The run with the median throughput of each path's rounds. */
function median(runs: RunResult[]): RunResult {
  return [...runs].sort((x, y) => x.perSecond - y.perSecond)[Math.floor(runs.length / 2)];
}

async function main(): Promise<void> {
  const topic = `bench-publish-${randomUUID().slice(0, 8)}`;
  const config = benchConfig({ EVENTMESH_KAFKA_TOPICS: topic });
  const kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 6, replicationFactor: 1 }] });

  // The runtime twice: one gateway process, and one per core (EVENTMESH_HTTP_PROCESSES, a gateway-only instance).
  const gateway = (processes: number) =>
    startInstanceProcess(
      benchEnv({
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_INSTANCE_ROLES: 'gateway',
        EVENTMESH_HTTP_PORT: '0',
        EVENTMESH_HTTP_PROCESSES: String(processes),
        EVENTMESH_INSTANCE_ID: `bench-publish-${processes}`,
      }),
    );
  const single = await gateway(1);
  const multi = await gateway(os.cpus().length);
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const rounds: RunResult[][] = [[], [], [], []];
  try {
    // The paths take turns, round after round, so a slow moment of the shared host hits them alike.
    for (let round = 0; round < ROUNDS; round++) {
      rounds[0].push(await viaHttp('eventmesh HTTP publish, 1 gateway process', single.url, single.child.pid, topic, EVENTS));
      rounds[1].push(await viaHttp(`eventmesh HTTP publish, ${os.cpus().length} gateway processes`, multi.url, multi.child.pid, topic, EVENTS));
      rounds[2].push(await perEventSends(producer, topic));
      rounds[3].push(await batchSends(producer, topic));
    }
  } finally {
    await single.stop();
    await multi.stop();
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }

  console.log(`\npublish benchmark: ${EVENTS} events of 1 KiB per path and round, ${ROUNDS} rounds, ${CONCURRENCY} concurrent clients, acks=-1, topic of 6 partitions`);
  console.log(`machine: ${os.cpus().length} cores (${os.cpus()[0].model}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; everything on one host\n`);
  const medians = rounds.map(median);
  console.log('The round with the median throughput of each path:\n');
  printTable(medians);
  console.log('\nevents/s of every round:');
  for (const runs of rounds) console.log(`- ${runs[0].name}: ${runs.map((r) => Math.round(r.perSecond)).join(', ')}`);
  const ratio = (ours: number, base: number) =>
    `${(medians[ours].perSecond / medians[base].perSecond).toFixed(2)}x; per round ${rounds[ours].map((r, i) => (r.perSecond / rounds[base][i].perSecond).toFixed(2)).join(', ')}`;
  for (const ours of [0, 1]) {
    console.log(`\n${medians[ours].name}:`);
    console.log(`- vs (a) per-event send: ${ratio(ours, 2)} (goal >= 1.0x)`);
    console.log(`- vs (b) batches of 500: ${ratio(ours, 3)} (goal >= 0.5x)`);
  }
}

async function perEventSends(producer: Producer, topic: string): Promise<RunResult> {
  const send = async (n: number) => void (await producer.send({ topic, acks: -1, messages: [rawMessage(n)] }));
  await pool(WARMUP, CONCURRENCY, send);
  const cpu = meterCpu({ client: 'self', broker: brokerPid() });
  const started = process.hrtime.bigint();
  const latencies = await pool(EVENTS, CONCURRENCY, send);
  return { ...summarize('(a) kafkajs send() per event', EVENTS, started, latencies), cpu: cpu() };
}

async function batchSends(producer: Producer, topic: string): Promise<RunResult> {
  const cpu = meterCpu({ client: 'self', broker: brokerPid() });
  const started = process.hrtime.bigint();
  for (let sent = 0; sent < EVENTS; sent += 500) {
    const size = Math.min(500, EVENTS - sent);
    await producer.sendBatch({ acks: -1, topicMessages: [{ topic, messages: Array.from({ length: size }, (_, i) => rawMessage(sent + i)) }] });
  }
  return { ...summarize('(b) kafkajs sendBatch of 500', EVENTS, started), cpu: cpu() };
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

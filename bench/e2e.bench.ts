import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { Pool } from 'undici';
import WebSocket from 'ws';
import { frameToKafkaMessage } from '../libs/frame';
import { benchConfig, benchEnv, percentile, startInstanceProcess } from './support';

/**
 * End to end: HTTP publish -> Kafka -> dispatch -> a WebSocket subscriber that acknowledges every event, against
 * a raw kafkajs pipeline on the same broker in the same run (producer `send()` per event -> a consumer's
 * `eachMessage`). Two measurements per path: throughput at full speed (`BENCH_CONCURRENCY` publishers), and the
 * latency from publish to delivery at half of the runtime's full-speed rate. `npm run bench:e2e`.
 */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 4000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const PARTITIONS = 6;

interface Run {
  perSecond: number;
  latencies: number[];
}

/** Publishes `total` events through `send`, `concurrency` at a time, or paced at `rate` per second. */
async function drive(total: number, send: (n: number) => Promise<void>, opts: { concurrency?: number; rate?: number }): Promise<void> {
  if (opts.rate) {
    const started = performance.now();
    const inFlight: Promise<void>[] = [];
    for (let n = 0; n < total; n++) {
      const due = started + (n * 1000) / opts.rate;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      inFlight.push(send(n));
    }
    await Promise.all(inFlight);
    return;
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: opts.concurrency ?? 1 }, async () => {
      while (next < total) await send(next++);
    }),
  );
}

/** Waits for `count` deliveries recorded in `deliveredAt`, with a deadline. */
async function settle(deliveredAt: Map<string, number>, ids: string[], deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (ids.some((id) => !deliveredAt.has(id))) {
    if (Date.now() > deadline) throw new Error(`only ${ids.filter((id) => deliveredAt.has(id)).length} of ${ids.length} delivered in time`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function measure(ids: string[], sentAt: Map<string, number>, deliveredAt: Map<string, number>, started: number): Run {
  const last = Math.max(...ids.map((id) => deliveredAt.get(id)!));
  return {
    perSecond: ids.length / ((last - started) / 1000),
    latencies: ids.map((id) => deliveredAt.get(id)! - sentAt.get(id)!).sort((a, b) => a - b),
  };
}

/** Warm-up, then a full-speed run and a run paced at `halfRate` (default: half the full-speed rate). */
async function measureRuns(
  send: (prefix: string) => (n: number) => Promise<void>,
  sentAt: Map<string, number>,
  deliveredAt: Map<string, number>,
  halfRate?: number,
): Promise<{ full: Run; half: Run }> {
  const ids = (prefix: string, total: number) => Array.from({ length: total }, (_, n) => `${prefix}-${n}`);
  await drive(500, send('warm'), { concurrency: CONCURRENCY });
  await settle(deliveredAt, ids('warm', 500), 60000);
  let started = performance.now();
  await drive(EVENTS, send('full'), { concurrency: CONCURRENCY });
  await settle(deliveredAt, ids('full', EVENTS), 120000);
  const full = measure(ids('full', EVENTS), sentAt, deliveredAt, started);
  started = performance.now();
  await drive(EVENTS, send('half'), { rate: halfRate ?? full.perSecond / 2 });
  await settle(deliveredAt, ids('half', EVENTS), 120000);
  return { full, half: measure(ids('half', EVENTS), sentAt, deliveredAt, started) };
}

async function runtimePath(topic: string): Promise<{ full: Run; half: Run }> {
  const instance = await startInstanceProcess(
    benchEnv({ EVENTMESH_KAFKA_TOPICS: topic, EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(PARTITIONS), EVENTMESH_HTTP_PORT: '0', EVENTMESH_INSTANCE_ID: `bench-e2e-${randomUUID().slice(0, 6)}` }),
  );
  const http = new Pool(instance.url, { connections: CONCURRENCY });
  try {
    const created = await http.request({ path: '/subscriptions', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ protocol: 'STREAM', topic }) });
    const { id: sub } = (await created.body.json()) as { id: string };
    const deliveredAt = new Map<string, number>();
    const socket = new WebSocket(`${instance.url.replace('http', 'ws')}/subscriptions/${sub}/ws?window=1000`);
    socket.on('message', (raw) => {
      const m = JSON.parse(String(raw)) as { type: string; deliveryId: string; event: { id: string } };
      if (m.type !== 'event') return;
      deliveredAt.set(m.event.id, performance.now());
      socket.send(JSON.stringify({ type: 'ack', deliveryId: m.deliveryId }));
    });
    await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
    const sentAt = new Map<string, number>();
    const publish = (prefix: string) => async (n: number) => {
      const id = `${prefix}-${n}`;
      sentAt.set(id, performance.now());
      const r = await http.request({
        path: `/events/publish?topic=${topic}`,
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({ specversion: '1.0', id, source: '/bench', type: 'bench.e2e', partitionkey: `k${n % 97}`, data: 'x'.repeat(1024) }),
      });
      await r.body.dump();
    };
    const runs = await measureRuns(publish, sentAt, deliveredAt);
    socket.close();
    return runs;
  } finally {
    await http.close();
    await instance.stop();
  }
}

async function rawPath(topic: string, halfRate: number): Promise<{ full: Run; half: Run }> {
  const config = benchConfig();
  const kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench-e2e-raw', logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  const consumer = kafka.consumer({ groupId: `bench-e2e-${randomUUID()}` });
  await producer.connect();
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const deliveredAt = new Map<string, number>();
  await consumer.run({
    eachMessage: async ({ message }) => {
      const id = message.headers?.ce_id?.toString();
      if (id) deliveredAt.set(id, performance.now());
    },
  });
  const sentAt = new Map<string, number>();
  const send = (prefix: string) => async (n: number) => {
    const id = `${prefix}-${n}`;
    sentAt.set(id, performance.now());
    const message = frameToKafkaMessage({ id, source: '/bench', type: 'bench.e2e', specversion: '1.0', datacontenttype: 'application/json',
      extensions: { partitionkey: `k${n % 97}` }, data: Buffer.from(JSON.stringify('x'.repeat(1024))) });
    await producer.send({ topic, acks: -1, messages: [message] });
  };
  try {
    return await measureRuns(send, sentAt, deliveredAt, halfRate);
  } finally {
    await consumer.disconnect();
    await producer.disconnect();
  }
}

async function main(): Promise<void> {
  const config = benchConfig();
  const admin = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench-e2e-admin', logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  const ours = `bench-e2e-${randomUUID().slice(0, 8)}`;
  const raw = `bench-e2e-raw-${randomUUID().slice(0, 8)}`;
  await admin.createTopics({ waitForLeaders: true, topics: [ours, raw].map((topic) => ({ topic, numPartitions: PARTITIONS, replicationFactor: 1 })) });
  try {
    const runtime = await runtimePath(ours);
    const baseline = await rawPath(raw, runtime.full.perSecond / 2);
    const row = (name: string, r: Run) =>
      `| ${name} | ${r.perSecond.toFixed(0)} | ${percentile(r.latencies, 50).toFixed(1)} | ${percentile(r.latencies, 95).toFixed(1)} | ${percentile(r.latencies, 99).toFixed(1)} |`;
    console.log(`\nend-to-end benchmark: ${EVENTS} events of 1 KiB per run, ${CONCURRENCY} concurrent publishers at full speed, topic of ${PARTITIONS} partitions`);
    console.log(`half load: ${(runtime.full.perSecond / 2).toFixed(0)} events/s offered to both paths`);
    console.log(`machine: ${os.cpus().length} cores (${os.cpus()[0].model}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; everything on one host\n`);
    console.log('| path | events/s | p50 ms | p95 ms | p99 ms |');
    console.log('|---|---|---|---|---|');
    console.log(row('eventmesh HTTP publish -> WebSocket + ack, full speed', runtime.full));
    console.log(row('kafkajs send() -> consumer eachMessage, full speed', baseline.full));
    console.log(row('eventmesh, half load', runtime.half));
    console.log(row('kafkajs, same offered load', baseline.half));
    console.log(`\nthroughput ratio: ${(runtime.full.perSecond / baseline.full.perSecond).toFixed(2)}x (goal >= 0.5x)`);
    console.log(`added p99 latency at half load: ${(percentile(runtime.half.latencies, 99) - percentile(baseline.half.latencies, 99)).toFixed(1)} ms (goal <= 5 ms)`);
  } finally {
    await admin.deleteTopics({ topics: [ours, raw] }).catch(() => undefined);
    await admin.disconnect();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);

import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { createTopicsAndWait } from '../libs/kafka/topic-creation';
import { Pool } from 'undici';
import WebSocket from 'ws';
import { EventMeshClient, type Consumer } from '@eventmesh/client';
import { frameToKafkaMessage } from '../libs/frame';
import { nestSubscriber } from './nest-subscriber';
import {
  benchConfig,
  benchEnv,
  brokerPid,
  cpuPerEvent,
  meterCpu,
  percentile,
  startInstanceProcess,
  until,
} from './support';

/**
 * End to end: HTTP publish -> Kafka -> dispatch -> a WebSocket subscriber that acknowledges every event, against
 * a raw kafkajs pipeline on the same broker in the same run (producer `send()` per event -> a consumer's
 * `eachMessage`). Two measurements per path: throughput at full speed (`BENCH_CONCURRENCY` publishers), and the
 * latency from publish to delivery at half of the runtime's full-speed rate. The paths take turns for BENCH_ROUNDS
 * rounds (default 3); the figures are the median round's. `npm run bench:e2e`.
 *
 * The SDK's path: the same publishers, the subscriber `@eventmesh/client`'s stream consumer (WebSocket, window 1000,
 * a handler per event, ack after it, the in-memory dedupe) instead of the raw WebSocket client; it is held to the
 * raw client's throughput and p99 at the same offered half load.
 *
 * The NestJS module's path: the same publishers, the subscriber a Nest application context with an `@OnMeshEvent`
 * method (bench/nest-subscriber.ts: the module ensures the subscription by name and runs the method per event in
 * Nest's context, ack after it); it is held to the raw client's throughput (goal at least 0.9x).
 */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 10000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const PARTITIONS = 6;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/**
 * `forwarded`: the WebSocket client and the publishers use a second, gateway-only instance, which dispatches
 * nothing: every event goes from the dispatching instance to the client's over the internal stream channel
 * (docs/topologies.md#streams-in-every-topology). Default `local`: one instance.
 */
const VIA = process.env.BENCH_E2E_VIA === 'forwarded' ? 'forwarded' : 'local';

interface Run {
  perSecond: number;
  latencies: number[];
  /** CPU seconds during the run: the dispatching instance, this process (publishers and subscriber), the broker, the host. */
  cpu?: Record<string, number>;
}

/** Publishes `total` events through `send`, `concurrency` at a time, or paced at `rate` per second. */
async function drive(
  total: number,
  send: (n: number) => Promise<void>,
  opts: { concurrency?: number; rate?: number },
): Promise<void> {
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
    if (Date.now() > deadline)
      throw new Error(`only ${ids.filter((id) => deliveredAt.has(id)).length} of ${ids.length} delivered in time`);
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
async function measureRuns(path: Path, round: number, halfRate?: number): Promise<{ full: Run; half: Run }> {
  const { send, sentAt, deliveredAt } = path;
  const ids = (prefix: string, total: number) => Array.from({ length: total }, (_, n) => `${prefix}-${n}`);
  const warm = `r${round}-warm`;
  await drive(500, send(warm), { concurrency: CONCURRENCY });
  await settle(deliveredAt, ids(warm, 500), 60000);
  let started = performance.now();
  const cpu = meterCpu({ instance: path.pid, client: 'self', broker: brokerPid() });
  await drive(EVENTS, send(`r${round}-full`), { concurrency: CONCURRENCY });
  await settle(deliveredAt, ids(`r${round}-full`, EVENTS), 120000);
  const full = { ...measure(ids(`r${round}-full`, EVENTS), sentAt, deliveredAt, started), cpu: cpu() };
  started = performance.now();
  await drive(EVENTS, send(`r${round}-half`), { rate: halfRate ?? full.perSecond / 2 });
  await settle(deliveredAt, ids(`r${round}-half`, EVENTS), 120000);
  return { full, half: measure(ids(`r${round}-half`, EVENTS), sentAt, deliveredAt, started) };
}

/** A path under test, set up once for every round. */
interface Path {
  send(prefix: string): (n: number) => Promise<void>;
  sentAt: Map<string, number>;
  deliveredAt: Map<string, number>;
  /** The dispatching instance's process, metered for CPU per event (none on the kafkajs path). */
  pid?: number;
  close(): Promise<void>;
}

async function runtimePath(topic: string, subscriber: 'raw' | 'sdk' | 'nestjs' = 'raw'): Promise<Path> {
  const instance = await startInstanceProcess(
    benchEnv({
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(PARTITIONS),
      EVENTMESH_HTTP_PORT: '0',
      EVENTMESH_INSTANCE_ID: `bench-e2e-${randomUUID().slice(0, 6)}`,
    }),
  );
  const gateway =
    VIA === 'forwarded'
      ? await startInstanceProcess(
          benchEnv({
            EVENTMESH_KAFKA_TOPICS: topic,
            EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(PARTITIONS),
            EVENTMESH_HTTP_PORT: '0',
            EVENTMESH_INSTANCE_ROLES: 'gateway',
            EVENTMESH_INSTANCE_ID: `bench-e2e-gw-${randomUUID().slice(0, 6)}`,
          }),
        ).catch(async (e: unknown) => {
          await instance.stop();
          throw e;
        })
      : undefined;
  const client = gateway ?? instance;
  const http = new Pool(client.url, { connections: CONCURRENCY });
  try {
    // Created on the dispatching instance: in LOCAL_STICKY_PULL it is pinned to the instance that creates it. Named
    // (after its topic, new each run: names are unique in the tenant), so the NestJS module's ensure finds it.
    const name = `${topic}-${subscriber}`;
    const created = await fetch(`${instance.url}/subscriptions/by-name/${name}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ protocol: 'STREAM', topic }),
    });
    if (created.status !== 201) throw new Error(`subscription ${name}: ${created.status} ${await created.text()}`);
    const { id: sub } = (await created.json()) as { id: string };
    const deliveredAt = new Map<string, number>();
    const stop =
      subscriber === 'sdk'
        ? await sdkSubscriber(client.url!, sub, deliveredAt)
        : subscriber === 'nestjs'
          ? await nestSubscriber(client.url!, topic, name, deliveredAt)
          : await rawSubscriber(client.url!, sub, deliveredAt);
    const sentAt = new Map<string, number>();
    const publish = (prefix: string) => async (n: number) => {
      const id = `${prefix}-${n}`;
      sentAt.set(id, performance.now());
      const r = await http.request({
        path: `/events/publish?topic=${topic}`,
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({
          specversion: '1.0',
          id,
          source: '/bench',
          type: 'bench.e2e',
          partitionkey: `k${n % 97}`,
          data: 'x'.repeat(1024),
        }),
      });
      await r.body.dump();
    };
    return {
      send: publish,
      sentAt,
      deliveredAt,
      pid: instance.child.pid,
      async close() {
        await stop();
        await http.close();
        await gateway?.stop();
        await instance.stop();
      },
    };
  } catch (e) {
    await http.close();
    await gateway?.stop();
    await instance.stop();
    throw e;
  }
}

/** The raw WebSocket client: ack each event as it comes. Resolves with its close. */
async function rawSubscriber(url: string, sub: string, deliveredAt: Map<string, number>): Promise<() => Promise<void>> {
  const socket = new WebSocket(`${url.replace('http', 'ws')}/subscriptions/${sub}/ws?window=1000`);
  socket.on('message', (raw) => {
    const m = JSON.parse(String(raw)) as { type: string; deliveryId: string; event: { id: string } };
    if (m.type !== 'event') return;
    deliveredAt.set(m.event.id, performance.now());
    socket.send(JSON.stringify({ type: 'ack', deliveryId: m.deliveryId }));
  });
  await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
  return async () => socket.close();
}

/** The SDK's consumer: a handler per event, acked after it. Resolves with its close. */
async function sdkSubscriber(url: string, sub: string, deliveredAt: Map<string, number>): Promise<() => Promise<void>> {
  const consumer: Consumer = new EventMeshClient({ url }).consume(
    sub,
    (event) => void deliveredAt.set(event.id, performance.now()),
    {
      transport: 'websocket',
      window: 1000,
    },
  );
  await until('the SDK consumer connected', () => (consumer.state === 'connected' ? true : undefined), 60000);
  return () => consumer.close();
}

async function rawPath(topic: string): Promise<Path> {
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
    const message = frameToKafkaMessage({
      id,
      source: '/bench',
      type: 'bench.e2e',
      specversion: '1.0',
      datacontenttype: 'application/json',
      extensions: { partitionkey: `k${n % 97}` },
      data: Buffer.from(JSON.stringify('x'.repeat(1024))),
    });
    await producer.send({ topic, acks: -1, messages: [message] });
  };
  return {
    send,
    sentAt,
    deliveredAt,
    async close() {
      await consumer.disconnect();
      await producer.disconnect();
    },
  };
}

async function main(): Promise<void> {
  const config = benchConfig();
  const admin = new Kafka({
    brokers: config.kafka.brokers,
    clientId: 'bench-e2e-admin',
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  const ours = `bench-e2e-${randomUUID().slice(0, 8)}`;
  const raw = `bench-e2e-raw-${randomUUID().slice(0, 8)}`;
  const sdk = `bench-e2e-sdk-${randomUUID().slice(0, 8)}`;
  const nest = `bench-e2e-nest-${randomUUID().slice(0, 8)}`;
  await createTopicsAndWait(
    admin,
    [ours, raw, sdk, nest].map((topic) => ({ topic, numPartitions: PARTITIONS, replicationFactor: 1 })),
  );
  const paths: Path[] = [];
  try {
    paths.push(
      await runtimePath(ours),
      await rawPath(raw),
      await runtimePath(sdk, 'sdk'),
      await runtimePath(nest, 'nestjs'),
    );
    const rounds: {
      runtime: { full: Run; half: Run };
      baseline: { full: Run; half: Run };
      sdk: { full: Run; half: Run };
      nest: { full: Run; half: Run };
    }[] = [];
    // The paths take turns, round after round; the baseline is offered the rate the runtime was offered at half load.
    for (let round = 0; round < ROUNDS; round++) {
      const runtime = await measureRuns(paths[0], round);
      const baseline = await measureRuns(paths[1], round, runtime.full.perSecond / 2);
      const sdkRuns = await measureRuns(paths[2], round, runtime.full.perSecond / 2);
      const nestRuns = await measureRuns(paths[3], round, runtime.full.perSecond / 2);
      rounds.push({ runtime, baseline, sdk: sdkRuns, nest: nestRuns });
    }
    const p99 = (r: Run) => percentile(r.latencies, 99);
    const throughputRatio = (r: (typeof rounds)[number]) => r.runtime.full.perSecond / r.baseline.full.perSecond;
    const addedP99 = (r: (typeof rounds)[number]) => p99(r.runtime.half) - p99(r.baseline.half);
    const byThroughput = [...rounds].sort((x, y) => throughputRatio(x) - throughputRatio(y));
    const byLatency = [...rounds].sort((x, y) => addedP99(x) - addedP99(y));
    const medianRound = byThroughput[Math.floor(rounds.length / 2)];
    const row = (name: string, r: Run) =>
      `| ${name} | ${r.perSecond.toFixed(0)} | ${percentile(r.latencies, 50).toFixed(1)} | ${percentile(r.latencies, 95).toFixed(1)} | ${p99(r).toFixed(1)} |`;
    console.log(
      `\nend-to-end benchmark (${VIA === 'forwarded' ? 'client and publishers on a gateway-only instance, forwarded from the dispatching one' : 'one instance'}): ${EVENTS} events of 1 KiB per run, ${ROUNDS} rounds, ${CONCURRENCY} concurrent publishers at full speed, topic of ${PARTITIONS} partitions`,
    );
    console.log(
      `machine: ${os.cpus().length} cores (${os.cpus()[0].model}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}; everything on one host\n`,
    );
    console.log(
      `The round with the median throughput ratio (half load: ${(medianRound.runtime.full.perSecond / 2).toFixed(0)} events/s offered to both paths):\n`,
    );
    console.log('| path | events/s | p50 ms | p95 ms | p99 ms |');
    console.log('|---|---|---|---|---|');
    console.log(row('eventmesh HTTP publish -> WebSocket + ack, full speed', medianRound.runtime.full));
    console.log(row('kafkajs send() -> consumer eachMessage, full speed', medianRound.baseline.full));
    console.log(row('eventmesh, half load', medianRound.runtime.half));
    console.log(row('kafkajs, same offered load', medianRound.baseline.half));
    console.log(
      row('eventmesh -> @eventmesh/client consumer (WebSocket, handler, ack), full speed', medianRound.sdk.full),
    );
    console.log(row('@eventmesh/client consumer, same offered load', medianRound.sdk.half));
    console.log(row('eventmesh -> @eventmesh/nestjs @OnMeshEvent method, full speed', medianRound.nest.full));
    console.log(row('@eventmesh/nestjs method, same offered load', medianRound.nest.half));
    console.log(
      `\nthroughput ratio: median ${throughputRatio(medianRound).toFixed(2)}x (goal >= ${VIA === 'forwarded' ? '0.6' : '0.8'}x); per round ${rounds.map((r) => throughputRatio(r).toFixed(2)).join(', ')}`,
    );
    console.log(
      `added p99 latency at half load: median ${addedP99(byLatency[Math.floor(rounds.length / 2)]).toFixed(1)} ms (goal <= 5 ms); ` +
        `per round ${rounds.map((r) => `${addedP99(r).toFixed(1)} (${p99(r.runtime.half).toFixed(1)} vs ${p99(r.baseline.half).toFixed(1)})`).join(', ')}`,
    );
    const sdkRatio = (r: (typeof rounds)[number]) => r.sdk.full.perSecond / r.runtime.full.perSecond;
    const sdkAddedP99 = (r: (typeof rounds)[number]) => p99(r.sdk.half) - p99(r.runtime.half);
    const mid = <T>(xs: T[], by: (x: T) => number) => [...xs].sort((x, y) => by(x) - by(y))[Math.floor(xs.length / 2)];
    console.log(
      `SDK consumer against the raw WebSocket client: throughput median ${sdkRatio(mid(rounds, sdkRatio)).toFixed(2)}x (goal >= 0.95x); per round ${rounds.map((r) => sdkRatio(r).toFixed(2)).join(', ')}`,
    );
    console.log(
      `SDK consumer's added p99 at half load: median ${sdkAddedP99(mid(rounds, sdkAddedP99)).toFixed(1)} ms (goal <= 2 ms); ` +
        `per round ${rounds.map((r) => `${sdkAddedP99(r).toFixed(1)} (${p99(r.sdk.half).toFixed(1)} vs ${p99(r.runtime.half).toFixed(1)})`).join(', ')}`,
    );
    const nestRatio = (r: (typeof rounds)[number]) => r.nest.full.perSecond / r.runtime.full.perSecond;
    const nestAddedP99 = (r: (typeof rounds)[number]) => p99(r.nest.half) - p99(r.runtime.half);
    console.log(
      `NestJS @OnMeshEvent method against the raw WebSocket client: throughput median ${nestRatio(mid(rounds, nestRatio)).toFixed(2)}x (goal >= 0.9x); per round ${rounds.map((r) => nestRatio(r).toFixed(2)).join(', ')}`,
    );
    console.log(
      `NestJS method's added p99 at half load (no goal): median ${nestAddedP99(mid(rounds, nestAddedP99)).toFixed(1)} ms; ` +
        `per round ${rounds.map((r) => `${nestAddedP99(r).toFixed(1)} (${p99(r.nest.half).toFixed(1)} vs ${p99(r.runtime.half).toFixed(1)})`).join(', ')}`,
    );
    console.log(
      '\nCPU per event at full speed, every round (from /proc: `instance` the dispatching instance, `client` this ' +
        'process, which runs the 32 publishers and the subscriber, `broker` Kafka, `host` every process on it):',
    );
    const cpuRows: [string, (r: (typeof rounds)[number]) => Run][] = [
      ['eventmesh, raw WebSocket client', (r) => r.runtime.full],
      ['kafkajs send() -> eachMessage', (r) => r.baseline.full],
      ['@eventmesh/client consumer', (r) => r.sdk.full],
      ['@eventmesh/nestjs method', (r) => r.nest.full],
    ];
    for (const [name, run] of cpuRows)
      console.log(
        `- ${name}: ${rounds.map((r, n) => `round ${n + 1}: ${cpuPerEvent(run(r).cpu ?? {}, EVENTS)}`).join('; ')}`,
      );
  } finally {
    for (const path of paths) await path.close();
    await admin.deleteTopics({ topics: [ours, raw, sdk, nest] }).catch(() => undefined);
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

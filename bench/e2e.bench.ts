import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { createTopicsAndWait } from '@libs/kafka';
import { Pool } from 'undici';
import { frameToKafkaMessage } from '@libs/frame';
import {
  clientsPath,
  drive,
  measureClients,
  publisherOf,
  reportClients,
  type ClientsPath,
  type ClientsRound,
} from './e2e-clients';
import { startSubscriber } from './stream-subscribers';
import {
  benchConfig,
  benchEnv,
  brokerPid,
  cpuPerEvent,
  meterCpu,
  monotonicMs,
  percentile,
  startInstanceProcess,
} from './support';

/**
 * End to end: HTTP publish -> Kafka -> dispatch -> a WebSocket subscriber that acknowledges every event, against
 * a raw kafkajs pipeline on the same broker in the same run (producer `send()` per event -> a consumer's
 * `eachMessage`). Two measurements per path: throughput at full speed (`BENCH_CONCURRENCY` publishers), and the
 * latency from publish to delivery at half of the runtime's full-speed rate. The paths take turns for BENCH_ROUNDS
 * rounds (default 3); the figures are the median round's. `npm run bench:e2e`.
 *
 * The clients (bench/e2e-clients.ts): the raw WebSocket client, `@eventmesh/client`'s stream consumer and a NestJS
 * `@OnMeshEvent` method, each on its own STREAM subscription of one topic of one more instance and in its own
 * process, receive the same events at the same time in each round after the paths above; the SDK is held to the raw
 * client's throughput (at least 0.95x) and p99 at half load (at most 2 ms added), the NestJS method to its
 * throughput (at least 0.9x).
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
/**
 * `BENCH_E2E_BATCH=N`: the runtime path's subscription is batched (`config.batch.maxEvents` N, 1-500; lingerMs 0),
 * its batches taken by the raw client as one delivery each. Absent: event by event.
 */
const BATCH = batchOf(process.env.BENCH_E2E_BATCH);

function batchOf(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 500)
    throw new Error(`BENCH_E2E_BATCH must be an integer of 1-500, got '${value}'`);
  return n;
}

interface Run {
  perSecond: number;
  latencies: number[];
  /** CPU seconds during the run: the dispatching instance, this process (publishers and subscriber), the broker, the host. */
  cpu?: Record<string, number>;
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
  let started = monotonicMs();
  const cpu = meterCpu({ instance: path.pid, client: 'self', broker: brokerPid() });
  await drive(EVENTS, send(`r${round}-full`), { concurrency: CONCURRENCY });
  await settle(deliveredAt, ids(`r${round}-full`, EVENTS), 120000);
  const full = { ...measure(ids(`r${round}-full`, EVENTS), sentAt, deliveredAt, started), cpu: cpu() };
  started = monotonicMs();
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

async function runtimePath(topic: string): Promise<Path> {
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
    const name = `${topic}-raw`;
    const created = await fetch(`${instance.url}/subscriptions/by-name/${name}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        protocol: 'STREAM',
        topic,
        ...(BATCH ? { config: { batch: { maxEvents: BATCH } } } : {}),
      }),
    });
    if (created.status !== 201) throw new Error(`subscription ${name}: ${created.status} ${await created.text()}`);
    const { id: sub } = (await created.json()) as { id: string };
    const deliveredAt = new Map<string, number>();
    const stop = await startSubscriber(
      'raw',
      { url: client.url, subscriptionId: sub, topic, name },
      (id) => void deliveredAt.set(id, monotonicMs()),
    );
    const sentAt = new Map<string, number>();
    return {
      send: publisherOf(http, topic, sentAt),
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
      if (id) deliveredAt.set(id, monotonicMs());
    },
  });
  const sentAt = new Map<string, number>();
  const send = (prefix: string) => async (n: number) => {
    const id = `${prefix}-${n}`;
    sentAt.set(id, monotonicMs());
    const message = frameToKafkaMessage({
      id,
      source: '/bench',
      type: 'bench.e2e',
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
  const clients = `bench-e2e-clients-${randomUUID().slice(0, 8)}`;
  await createTopicsAndWait(
    admin,
    [ours, raw, clients].map((topic) => ({ topic, numPartitions: PARTITIONS, replicationFactor: 1 })),
  );
  const paths: Path[] = [];
  let clientsRun: ClientsPath | undefined;
  try {
    paths.push(await runtimePath(ours), await rawPath(raw));
    clientsRun = await clientsPath(clients, PARTITIONS, CONCURRENCY);
    const rounds: {
      runtime: { full: Run; half: Run };
      baseline: { full: Run; half: Run };
    }[] = [];
    const clientRounds: ClientsRound[] = [];
    // The paths take turns, round after round; the baseline is offered the rate the runtime was offered at half load.
    for (let round = 0; round < ROUNDS; round++) {
      const runtime = await measureRuns(paths[0], round);
      const baseline = await measureRuns(paths[1], round, runtime.full.perSecond / 2);
      rounds.push({ runtime, baseline });
      clientRounds.push(await measureClients(clientsRun, round, EVENTS, CONCURRENCY));
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
      `\nend-to-end benchmark (${VIA === 'forwarded' ? 'client and publishers on a gateway-only instance, forwarded from the dispatching one' : 'one instance'}${BATCH ? `; the subscription batched, maxEvents ${BATCH}` : ''}): ${EVENTS} events of 1 KiB per run, ${ROUNDS} rounds, ${CONCURRENCY} concurrent publishers at full speed, topic of ${PARTITIONS} partitions`,
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
      `\nthroughput ratio: median ${throughputRatio(medianRound).toFixed(2)}x (goal >= ${VIA === 'forwarded' ? '0.6' : '0.9'}x); per round ${rounds.map((r) => throughputRatio(r).toFixed(2)).join(', ')}`,
    );
    console.log(
      `added p99 latency at half load: median ${addedP99(byLatency[Math.floor(rounds.length / 2)]).toFixed(1)} ms (goal <= 5 ms); ` +
        `per round ${rounds.map((r) => `${addedP99(r).toFixed(1)} (${p99(r.runtime.half).toFixed(1)} vs ${p99(r.baseline.half).toFixed(1)})`).join(', ')}`,
    );
    console.log(
      '\nCPU per event at full speed, every round (from /proc: `instance` the dispatching instance, `client` this ' +
        'process, which runs the 32 publishers and the subscriber, `broker` Kafka, `host` every process on it):',
    );
    const cpuRows: [string, (r: (typeof rounds)[number]) => Run][] = [
      ['eventmesh, raw WebSocket client', (r) => r.runtime.full],
      ['kafkajs send() -> eachMessage', (r) => r.baseline.full],
    ];
    for (const [name, run] of cpuRows)
      console.log(
        `- ${name}: ${rounds.map((r, n) => `round ${n + 1}: ${cpuPerEvent(run(r).cpu ?? {}, EVENTS)}`).join('; ')}`,
      );
    reportClients(clientRounds, EVENTS);
  } finally {
    for (const path of paths) await path.close();
    await clientsRun?.close();
    await admin.deleteTopics({ topics: [ours, raw, clients] }).catch(() => undefined);
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

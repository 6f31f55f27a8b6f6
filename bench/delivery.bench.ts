import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { Kafka, logLevel, Producer } from 'kafkajs';
import { frameToKafkaMessage } from '@libs/frame';
import type { PartitionsView } from '@libs/ownership';
import {
  benchConfig,
  benchEnv,
  brokerPid,
  createTopics,
  median,
  meterCpu,
  percentile,
  resetOwnership,
  ROOT,
  sleep,
  startInstanceProcess,
  until,
} from './support';
import { Sink } from './webhook-sink';

/**
 * Webhook delivery of ONE instance against a kafkajs consumer group on the same host, the same sink and the same
 * events, in the same run (`npm run bench:delivery`).
 *
 * Each round and scenario fills two fresh topics of PARTITIONS partitions with the same events of 1 KiB (the
 * scenario's backlog: PARTITION_EVENTS, EVENTS or BATCH_EVENTS; KEYS partition keys, key k always in partition
 * k % PARTITIONS), then:
 * - ours: one instance (BENCH_TOPOLOGY, default PARTITION_OWNED_PULL) gets a webhook subscription from the earliest
 *   offset with the scenario's `config.ordering`;
 * - the group: one kafkajs member process (bench/group-member.ts) with `partitionsConsumedConcurrently` =
 *   PARTITIONS, doing the same signed CloudEvents POSTs.
 * Throughput is the drain rate from the first to the last delivery of the backlog (startup excluded on both sides);
 * then LATENCY_RATE events/s are produced for LATENCY_SECONDS and each one's latency from the produce call to the
 * sink is measured. The sink (in this process) checks every Standard Webhooks signature, and answers after
 * the scenario's delay.
 *
 * BENCH_BASELINE_ROOT names another built checkout (e.g. of main, or of an earlier commit): its instance runs as a
 * third path in every round, on topics of its own, for a before/after comparison in the same run. The baseline runs
 * BENCH_BASELINE_TOPOLOGY (default LOCAL_STICKY_PULL, as does ours then unless BENCH_TOPOLOGY says otherwise: two
 * PARTITION_OWNED_PULL instances would share the partitions of both).
 *
 * Scenarios: `partition` with a sink that answers at once (goal: >= 1.2x the group, no round below 1.0x), and `key` over 64 keys with
 * a sink that answers in 5 ms (goal: >= 3x the group). `batch` (only when BENCH_SCENARIOS names it): ordering
 * `partition` with `config.batch` (CloudEvents batch content mode, BENCH_BATCH_MAX_EVENTS a batch, default 100)
 * against the same instance's per-event delivery (a subscription without `batch`, on a topic of its own) to the
 * same sink, which takes both (goal: >= 5x). Rounds alternate which path goes first. Figures are noisy on
 * a shared host: read the per-round ratios and the medians.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 6000);
const PARTITIONS = Number(process.env.BENCH_PARTITIONS ?? 6);
const KEYS = Number(process.env.BENCH_KEYS ?? 64);
const LATENCY_RATE = Number(process.env.BENCH_LATENCY_RATE ?? 400);
const LATENCY_SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 4);
const BASELINE_ROOT = process.env.BENCH_BASELINE_ROOT;
const TOPOLOGY = process.env.BENCH_TOPOLOGY ?? (BASELINE_ROOT ? 'LOCAL_STICKY_PULL' : 'PARTITION_OWNED_PULL');
/** The baseline instance's topology: LOCAL_STICKY_PULL unless asked (it can run beside an owned-mode instance). */
const BASELINE_TOPOLOGY = process.env.BENCH_BASELINE_TOPOLOGY ?? 'LOCAL_STICKY_PULL';
const ONLY = process.env.BENCH_SCENARIOS?.split(',');
const BATCH_MAX_EVENTS = Number(process.env.BENCH_BATCH_MAX_EVENTS ?? 100);
/**
 * The batched scenario's backlog: batched, 6,000 events drain in 0.1-0.6 s, a round too short to time (the first
 * delivery's moment alone moves the rate by tens of percent), so it has a backlog of its own.
 */
const BATCH_EVENTS = Number(process.env.BENCH_BATCH_EVENTS ?? 30000);
/**
 * The `partition` scenario's backlog. Both paths drain 6,000 events in 0.5-1.2 s, and a round that short measured
 * the host's noise and the group member's first second (a fresh process each round: its code compiling, its fetches
 * ramping up) against a warmed instance: on 2026-12-07 two runs of 6,000 gave 1.23x (rounds 1.18-1.40) and 0.88x
 * (0.75-1.40) with the group at 6,000-7,600 events/s; with 30,000 the rounds were 0.84-0.97x and the group drained
 * 10,600-11,300 events/s (docs/benchmarks.md).
 */
const PARTITION_EVENTS = Number(process.env.BENCH_PARTITION_EVENTS ?? 30000);
const config = benchConfig();

interface Scenario {
  name: 'partition' | 'key' | 'batch';
  ordering: 'partition' | 'key';
  sinkDelayMs: number;
  goal: number;
  /** The lowest ratio any round may have, when the goal says so. */
  floor?: number;
  /** Our subscription's `config.batch`; the baseline path is then our own per-event delivery, not the group. */
  batch?: Record<string, number>;
  /** Events of the backlog each path drains. */
  events: number;
}
const SCENARIOS: Scenario[] = (
  [
    { name: 'partition', ordering: 'partition', sinkDelayMs: 0, goal: 1.2, floor: 1, events: PARTITION_EVENTS },
    { name: 'key', ordering: 'key', sinkDelayMs: 5, goal: 3, events: EVENTS },
    {
      name: 'batch',
      ordering: 'partition',
      sinkDelayMs: 0,
      goal: 5,
      batch: { maxEvents: BATCH_MAX_EVENTS },
      events: BATCH_EVENTS,
    },
  ] as Scenario[]
).filter((s) => (ONLY ? ONLY.includes(s.name) : s.name !== 'batch'));

// --- events --------------------------------------------------------------------------------------------------

/** Events through the instance before the first round (not measured). */
const WARM_UP_EVENTS = 2000;

/** The longest a round waits for its deliveries. */
const DRAIN_WAIT_MS = 300000;
const DATA = Buffer.from(JSON.stringify('x'.repeat(1000)));

function messages(topic: string, from: number, count: number) {
  return Array.from({ length: count }, (_, i) => {
    const n = from + i;
    const key = n % KEYS;
    const m = frameToKafkaMessage({
      id: `${topic}:${n}`,
      source: '/bench/delivery',
      type: 'bench.delivery',
      datacontenttype: 'application/json',
      extensions: { partitionkey: `k${key}` },
      data: DATA,
    });
    return { ...m, partition: key % PARTITIONS };
  });
}

async function fill(producer: Producer, topic: string, events: number): Promise<string[]> {
  for (let start = 0; start < events; start += 600) {
    await producer.send({ topic, acks: -1, messages: messages(topic, start, Math.min(600, events - start)) });
  }
  return Array.from({ length: events }, (_, n) => `${topic}:${n}`);
}

interface Measured {
  perSecond: number;
  latency: { p50: number; p95: number; p99: number };
  /** CPU µs per event of the delivering process, and of the Kafka broker, during the drain. */
  cpuUs: number;
  brokerCpuUs: number;
  /** Every process on the host (the sink and the load generator, Postgres and Temporal too). */
  hostCpuUs: number;
}

/** The drain rate of `ids` (first to last delivery), then the latency of a steady load into the same topic. */
async function measure(sink: Sink, producer: Producer, topic: string, ids: string[], pid: number): Promise<Measured> {
  await until(
    `the first delivery of ${topic}`,
    () => (sink.firstAt.has(ids[0]) || ids.some((id) => sink.firstAt.has(id)) ? true : undefined),
    DRAIN_WAIT_MS,
    20,
  );
  const cpu = meterCpu({ path: pid, broker: brokerPid() });
  await until(
    `${ids.length} deliveries of ${topic}`,
    () => (ids.every((id) => sink.firstAt.has(id)) ? true : undefined),
    DRAIN_WAIT_MS,
    20,
  );
  const used = cpu();
  const times = ids.map((id) => sink.firstAt.get(id)!);
  const perSecond = (ids.length - 1) / ((Math.max(...times) - Math.min(...times)) / 1000);
  // Latency: LATENCY_RATE events a second, each timed from its produce call to the sink.
  const producedAt = new Map<string, number>();
  const every = 1000 / (LATENCY_RATE / 10);
  for (let tick = 0, n = ids.length; tick < LATENCY_SECONDS * 10; tick++, n += LATENCY_RATE / 10) {
    const started = Date.now();
    const batch = messages(topic, n, LATENCY_RATE / 10);
    for (let i = 0; i < batch.length; i++) producedAt.set(`${topic}:${n + i}`, started);
    await producer.send({ topic, acks: -1, messages: batch });
    await sleep(Math.max(0, every - (Date.now() - started)));
  }
  await until(
    `the latency events of ${topic}`,
    () => ([...producedAt.keys()].every((id) => sink.firstAt.has(id)) ? true : undefined),
    DRAIN_WAIT_MS,
    20,
  );
  const latencies = [...producedAt].map(([id, at]) => sink.firstAt.get(id)! - at).sort((a, b) => a - b);
  return {
    perSecond,
    latency: { p50: percentile(latencies, 50), p95: percentile(latencies, 95), p99: percentile(latencies, 99) },
    cpuUs: ((used.path ?? NaN) / ids.length) * 1e6,
    brokerCpuUs: ((used.broker ?? NaN) / ids.length) * 1e6,
    hostCpuUs: ((used.host ?? NaN) / ids.length) * 1e6,
  };
}

// --- the two paths -------------------------------------------------------------------------------------------

type Instance = Awaited<ReturnType<typeof startInstanceProcess>>;

async function subscribe(
  instance: Instance,
  sink: string,
  topic: string,
  own: Record<string, unknown>,
): Promise<{ id: string; secret: string }> {
  const response = await fetch(`${instance.url}/subscriptions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sink, topic, config: { trusted: true, startFrom: 'earliest', ...own } }),
  });
  if (response.status !== 201) throw new Error(`subscription: ${response.status} ${await response.text()}`);
  return (await response.json()) as { id: string; secret: string };
}

async function ours(
  instance: Instance,
  sink: Sink,
  producer: Producer,
  topic: string,
  ids: string[],
  own: Record<string, unknown>,
): Promise<Measured> {
  const route = sink.route();
  const subscription = await subscribe(instance, route.url, topic, own);
  route.setKey(subscription.secret);
  try {
    return await measure(sink, producer, topic, ids, instance.child.pid!);
  } finally {
    await fetch(`${instance.url}/subscriptions/${subscription.id}`, { method: 'DELETE' });
    route.close();
  }
}

async function group(sink: Sink, producer: Producer, topic: string, ids: string[]): Promise<Measured> {
  const secret = `whsec_${Buffer.from(randomUUID()).toString('base64')}`;
  const route = sink.route();
  route.setKey(secret);
  // BENCH_GROUP_NODE_ARGS go to the member's node, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`, as BENCH_INSTANCE_NODE_ARGS to the instance's.
  const nodeArgs = (process.env.BENCH_GROUP_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, path.join(ROOT, 'dist/bench/group-member.js')], {
    env: {
      PATH: process.env.PATH ?? '',
      BENCH_GROUP_TOPIC: topic,
      BENCH_GROUP_ID: `bench-delivery-${randomUUID().slice(0, 8)}`,
      BENCH_GROUP_SINK: route.url,
      BENCH_GROUP_BROKERS: config.kafka.brokers.join(','),
      BENCH_GROUP_MEMBER: 'a',
      BENCH_GROUP_SESSION_TIMEOUT_MS: '10000',
      BENCH_GROUP_FROM_BEGINNING: '1',
      BENCH_GROUP_CONCURRENCY: String(PARTITIONS),
      BENCH_GROUP_SIGNING_SECRET: secret,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    return await measure(sink, producer, topic, ids, child.pid!);
  } finally {
    // SIGTERM when profiling: the profile is written at exit.
    child.kill(nodeArgs.length > 0 ? 'SIGTERM' : 'SIGKILL');
  }
}

/** PARTITION_OWNED_PULL: every partition of `topics` owned by the instance and polling. */
async function settled(instance: Instance, topics: string[]): Promise<void> {
  await until(
    'the instance to own every partition',
    async () => {
      const v = (await (await fetch(`${instance.url}/admin/partitions`)).json()) as PartitionsView;
      const mine = v.partitions.filter((p) => topics.includes(p.topic));
      return mine.length === topics.length * PARTITIONS && mine.every((p) => p.owner && p.polling) ? true : undefined;
    },
    120000,
  );
}

async function main(): Promise<void> {
  const kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench-delivery', logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  const sink = new Sink();
  await sink.start();
  const run = randomUUID().slice(0, 6);
  const topicOf = (round: number, scenario: string, path: 'ours' | 'base' | 'group') =>
    `bench-dlv-${run}-${round}-${scenario}-${path}`;
  const topicsOf = (path: 'ours' | 'base' | 'group', scenarios = SCENARIOS) =>
    scenarios.flatMap((s) => Array.from({ length: ROUNDS }, (_, r) => topicOf(r, s.name, path)));
  /**
   * The instance is one process for every round, where each group member is a new one: without a warm-up its first
   * round measured it compiling the delivery path (round 1 was the lowest ratio of five in runs F, H and I: 0.74,
   * 0.79, 0.72). WARM_UP_EVENTS go through it first, on a topic of their own, not measured.
   */
  const warmTopic = `bench-dlv-${run}-warm-ours`;
  // A `batch` scenario's per-event path is our instance too: its "group" topics are the instance's.
  const ourTopics = [
    warmTopic,
    ...topicsOf('ours'),
    ...topicsOf(
      'group',
      SCENARIOS.filter((s) => s.batch),
    ),
  ];
  const groupTopics = topicsOf('group').filter((t) => !ourTopics.includes(t));
  const baseTopics = BASELINE_ROOT ? topicsOf('base') : [];
  await createTopics(kafka, [...ourTopics, ...groupTopics, ...baseTopics], PARTITIONS);
  const own = (s: Scenario) => ({ ordering: s.ordering, ...(s.batch ? { batch: s.batch } : {}) });
  console.log(
    `delivery benchmark: ${ROUNDS} rounds, ${EVENTS} events of 1 KiB (partition: ${PARTITION_EVENTS}, batched: ${BATCH_EVENTS}) over ${PARTITIONS} partitions and ${KEYS} keys, then ${LATENCY_RATE} events/s for ${LATENCY_SECONDS} s; ${TOPOLOGY}`,
  );
  console.log(
    `machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, Node ${process.version}, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  if (TOPOLOGY === 'PARTITION_OWNED_PULL') await resetOwnership();
  const instance = await startInstanceProcess(
    benchEnv({
      EVENTMESH_INSTANCE_ID: `dlv${run}`,
      EVENTMESH_HTTP_PORT: '0',
      EVENTMESH_DELIVERY_TOPOLOGY: TOPOLOGY,
      EVENTMESH_KAFKA_TOPICS: ourTopics.join(','),
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(PARTITIONS),
    }),
  );
  const baseline = BASELINE_ROOT
    ? await startInstanceProcess(
        benchEnv({
          EVENTMESH_INSTANCE_ID: `dlvbase${run}`,
          EVENTMESH_HTTP_PORT: '0',
          EVENTMESH_DELIVERY_TOPOLOGY: BASELINE_TOPOLOGY,
          EVENTMESH_KAFKA_TOPICS: baseTopics.join(','),
          EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(PARTITIONS),
        }),
        BASELINE_ROOT,
      )
    : undefined;
  if (baseline) console.log(`baseline: the build in ${BASELINE_ROOT}, ${BASELINE_TOPOLOGY}`);
  const f = (n: number, d = 0) => n.toFixed(d);
  try {
    if (TOPOLOGY === 'PARTITION_OWNED_PULL') await settled(instance, ourTopics);
    const warm = await ours(instance, sink, producer, warmTopic, await fill(producer, warmTopic, WARM_UP_EVENTS), {
      ordering: 'partition',
    });
    console.log(
      `  warm-up: ${WARM_UP_EVENTS} events through the instance at ${f(warm.perSecond)} events/s (not counted)`,
    );
    for (const scenario of SCENARIOS) {
      sink.delayMs = scenario.sinkDelayMs;
      const vs = scenario.batch ? 'per-event' : 'group';
      const rows: { round: number; ours: Measured; group: Measured; base?: Measured }[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const oursTopic = topicOf(round, scenario.name, 'ours');
        const groupTopic = topicOf(round, scenario.name, 'group');
        const oursIds = await fill(producer, oursTopic, scenario.events);
        const groupIds = await fill(producer, groupTopic, scenario.events);
        const baseTopic = topicOf(round, scenario.name, 'base');
        const baseIds = baseline ? await fill(producer, baseTopic, scenario.events) : [];
        const paths: (() => Promise<void>)[] = [
          async () => void (mine = await ours(instance, sink, producer, oursTopic, oursIds, own(scenario))),
          scenario.batch
            ? async () =>
                void (theirs = await ours(instance, sink, producer, groupTopic, groupIds, {
                  ordering: scenario.ordering,
                }))
            : async () => void (theirs = await group(sink, producer, groupTopic, groupIds)),
        ];
        if (baseline)
          paths.push(async () => void (base = await ours(baseline, sink, producer, baseTopic, baseIds, own(scenario))));
        let mine!: Measured;
        let theirs!: Measured;
        let base: Measured | undefined;
        // Rotate which path goes first: the host's other load changes over a round.
        for (let i = 0; i < paths.length; i++) await paths[(i + round) % paths.length]();
        rows.push({ round, ours: mine, group: theirs, base });
        console.log(
          `  ${scenario.name} round ${round + 1}/${ROUNDS}: ours ${f(mine.perSecond)} events/s, ${vs} ${f(theirs.perSecond)} events/s, ratio ${(mine.perSecond / theirs.perSecond).toFixed(2)}x` +
            (base
              ? `; baseline ${f(base.perSecond)} events/s, ratio ${(base.perSecond / theirs.perSecond).toFixed(2)}x, CPU µs/event ours ${f(mine.cpuUs)} baseline ${f(base.cpuUs)} group ${f(theirs.cpuUs)}`
              : ''),
        );
      }
      console.log(
        `\n| ${scenario.batch ? `batched (${JSON.stringify(scenario.batch)}), ordering \`${scenario.ordering}\`` : `ordering \`${scenario.name}\``}, sink answers in ${scenario.sinkDelayMs} ms | round | eventmesh events/s | ${vs} events/s | ratio | eventmesh p50/p95/p99 ms | ${vs} p50/p95/p99 ms | CPU µs/event ours / ${vs} | broker CPU µs/event ours / ${vs} | host CPU µs/event ours / ${vs} |`,
      );
      console.log('|---|---|---|---|---|---|---|---|---|---|');
      for (const r of rows) {
        const l = (m: Measured) => `${m.latency.p50}/${m.latency.p95}/${m.latency.p99}`;
        console.log(
          `| | ${r.round + 1} | ${f(r.ours.perSecond)} | ${f(r.group.perSecond)} | ${(r.ours.perSecond / r.group.perSecond).toFixed(2)}x | ${l(r.ours)} | ${l(r.group)} | ${f(r.ours.cpuUs)} / ${f(r.group.cpuUs)} | ${f(r.ours.brokerCpuUs)} / ${f(r.group.brokerCpuUs)} | ${f(r.ours.hostCpuUs)} / ${f(r.group.hostCpuUs)} |`,
        );
      }
      const ratios = rows.map((r) => r.ours.perSecond / r.group.perSecond);
      const m = median(ratios);
      console.log(
        `| **median** | | ${f(median(rows.map((r) => r.ours.perSecond)))} | ${f(median(rows.map((r) => r.group.perSecond)))} | **${m.toFixed(2)}x** | | | | | |`,
      );
      const floor = scenario.floor;
      const met = m >= scenario.goal && (floor === undefined || Math.min(...ratios) >= floor);
      const goal = `goal >= ${scenario.goal}x${floor === undefined ? '' : `, no round below ${floor.toFixed(1)}x`}`;
      console.log(
        `\nordering ${scenario.name}: median ratio ${m.toFixed(2)}x, per round ${ratios.map((x) => x.toFixed(2)).join(', ')}; ${goal}: ${met ? 'met' : 'NOT met'}`,
      );
      if (baseline) {
        const baseRatios = rows.map((r) => r.base!.perSecond / r.group.perSecond);
        console.log(
          `baseline build: median ratio ${median(baseRatios).toFixed(2)}x, per round ${baseRatios.map((x) => x.toFixed(2)).join(', ')}; ours/baseline per round ${rows.map((r) => (r.ours.perSecond / r.base!.perSecond).toFixed(2)).join(', ')}`,
        );
      }
      console.log('');
    }
    console.log(`bad signatures at the sink: ${sink.badSignatures} of ${sink.received} requests`);
    console.log(
      `deliveries that reached the sink after their subscription's DELETE was answered: ${sink.late} (the latest ${sink.latestLateMs} ms after)`,
    );
  } finally {
    await instance.stop();
    await baseline?.stop();
    if (TOPOLOGY === 'PARTITION_OWNED_PULL') await resetOwnership();
    await producer.disconnect();
    await sink.stop();
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [...ourTopics, ...groupTopics, ...baseTopics] }).catch(() => undefined);
    await admin.disconnect();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

import { ChildProcess, spawn } from 'node:child_process';
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Kafka, logLevel, Producer } from 'kafkajs';
import { frameToKafkaMessage } from '@libs/frame';
import type { PartitionsView } from '@libs/ownership';
import {
  benchConfig,
  benchEnv,
  createTopics,
  percentile,
  resetOwnership,
  ROOT,
  sleep,
  startInstanceProcess,
  until,
} from './support';

/**
 * PARTITION_OWNED_PULL under failure and load, each against a kafkajs consumer group in the same run.
 *
 * Takeover: 3 instances own 6 partitions while a producer writes to every partition. Each round SIGKILLs one
 * owner and measures, for each of its partitions, the time from the kill to the first delivery (to the same HTTP
 * sink) of an event produced after the kill, i.e. delivered by the new owner; then restarts it and waits for the
 * assignment to settle. The baseline is 3 consumer-group member processes (session timeout = the TTL, heartbeat
 * a third of it) POSTing each record to the sink as a signed CloudEvents request (bench/group-member.ts), killed
 * the same way.
 *
 * Throughput: N events already in a fresh 6-partition topic, delivered to the sink by 1, 2 and 3 instances (a
 * webhook subscription starting at the earliest offset), and by 1, 2 and 3 group members; from first to last
 * delivery.
 *
 * It ends the ownership workflows of its Temporal namespace first (a clean membership). `npm run bench:takeover`;
 * BENCH_KILLS=0 measures throughput only.
 */
const TTL_MS = Number(process.env.BENCH_TTL_MS ?? 10000);
const KILLS = Number(process.env.BENCH_KILLS ?? 10);
const LOAD_PER_SECOND = Number(process.env.BENCH_LOAD_PER_SECOND ?? 120);
const THROUGHPUT_EVENTS = Number(process.env.BENCH_THROUGHPUT_EVENTS ?? 6000);
/** The goal for the p99 of a takeover after a kill -9 (issue 36), whatever the TTL. */
const CRASH_GOAL_MS = 3000;
const PARTITIONS = 6;
const config = benchConfig();

// --- the sink both paths deliver to ------------------------------------------------------------------------

class Sink {
  readonly firstAt = new Map<string, number>();
  /** Every delivery in arrival order: the partition (read from the event id) and when. */
  readonly log: { partition: number; at: number }[] = [];
  received = 0;
  private server?: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const id = String(req.headers['ce-id'] ?? '');
        this.received++;
        const at = Date.now();
        if (id && !this.firstAt.has(id)) this.firstAt.set(id, at);
        this.log.push({ partition: Number(id.split(':')[1]), at });
        res.writeHead(200).end();
      });
    });
    this.server.keepAliveTimeout = 60000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/sink`;
  }

  stop(): Promise<void> {
    this.server?.closeAllConnections();
    return new Promise((resolve) => this.server!.close(() => resolve()));
  }
}

// --- load ----------------------------------------------------------------------------------------------------

const eventId = (topic: string, partition: number, seq: number) => `${topic}:${partition}:${seq}`;

/** Produces one event per partition LOAD_PER_SECOND/6 times a second, recording when each was produced. */
class Load {
  readonly producedAt = new Map<string, { partition: number; at: number }>();
  private running = false;
  private loop?: Promise<void>;
  constructor(
    private readonly producer: Producer,
    private readonly topic: string,
  ) {}

  start(): void {
    this.running = true;
    let seq = 0;
    const every = (1000 * PARTITIONS) / LOAD_PER_SECOND;
    this.loop = (async () => {
      while (this.running) {
        const started = Date.now();
        seq++;
        const messages = Array.from({ length: PARTITIONS }, (_, partition) => {
          const id = eventId(this.topic, partition, seq);
          this.producedAt.set(id, { partition, at: Date.now() });
          return { ...message(id), partition };
        });
        await this.producer.send({ topic: this.topic, acks: -1, messages }).catch(() => undefined);
        await sleep(Math.max(0, every - (Date.now() - started)));
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

/**
 * Requests the killed process wrote before it died can still be read by the sink a moment later; deliveries
 * this long after the kill are the new owner's.
 */
const KILL_GUARD_MS = 100;

/** When the first event of `partition` reached the sink after the kill at `t0`: the new owner's first delivery. */
function firstDeliveryAfter(sink: Sink, partition: number, t0: number): number | undefined {
  const after = t0 + KILL_GUARD_MS;
  let i = sink.log.length;
  while (i > 0 && sink.log[i - 1].at > after) i--;
  for (; i < sink.log.length; i++) if (sink.log[i].partition === partition) return sink.log[i].at;
  return undefined;
}

const message = (id: string) =>
  frameToKafkaMessage({
    id,
    source: '/bench/takeover',
    type: 'bench.takeover',
    datacontenttype: 'application/json',
    extensions: {},
    data: Buffer.from(JSON.stringify('x'.repeat(1000))),
  });

// --- helpers -------------------------------------------------------------------------------------------------

function stats(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1],
  };
}

// --- our path: instances -----------------------------------------------------------------------------------

type Instance = Awaited<ReturnType<typeof startInstanceProcess>>;

class Cluster {
  readonly instances = new Map<string, Instance>();
  constructor(
    private readonly topic: string,
    private readonly runId: string,
  ) {}

  async start(name: string): Promise<void> {
    this.instances.set(
      name,
      await startInstanceProcess(
        benchEnv({
          EVENTMESH_INSTANCE_ID: `${this.runId}-${name}`,
          EVENTMESH_HTTP_PORT: '0',
          EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL',
          EVENTMESH_DELIVERY_LEASE_TTL_MS: String(TTL_MS),
          EVENTMESH_KAFKA_TOPICS: this.topic,
          EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(PARTITIONS),
        }),
      ),
    );
  }

  id = (name: string) => `${this.runId}-${name}`;
  any = () => [...this.instances.values()].find((i) => i.child.exitCode === null && i.child.signalCode === null)!;

  async view(): Promise<PartitionsView> {
    const response = await fetch(`${this.any().url}/admin/partitions`);
    return (await response.json()) as PartitionsView;
  }

  /** Every partition of the topic owned by one of `names` and polling, members exactly `names`. */
  async settled(names: string[]): Promise<PartitionsView> {
    const members = names.map(this.id).sort();
    return until(`the assignment to settle on ${names.join(', ')}`, async () => {
      const v = await this.view();
      const mine = v.partitions.filter((p) => p.topic === this.topic);
      const ok =
        JSON.stringify(v.members) === JSON.stringify(members) &&
        mine.length === PARTITIONS &&
        mine.every((p) => p.owner && p.polling && p.lease?.owner === p.owner && p.lease.epoch === p.epoch);
      return ok ? v : undefined;
    });
  }

  async subscribe(sink: string, startFrom: 'latest' | 'earliest'): Promise<void> {
    const response = await fetch(`${this.any().url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink, topic: this.topic, config: { trusted: true, startFrom } }),
    });
    if (response.status !== 201) throw new Error(`subscription: ${response.status} ${await response.text()}`);
  }

  async stop(): Promise<void> {
    await Promise.all(
      [...this.instances.values()].map((i) =>
        i.child.exitCode === null && i.child.signalCode === null ? i.stop() : undefined,
      ),
    );
  }
}

// --- baseline: consumer group members --------------------------------------------------------------------------

interface Member {
  child: ChildProcess;
  assigned: number[];
  joinedAt: number;
}

class Group {
  readonly members = new Map<string, Member>();
  constructor(
    private readonly topic: string,
    private readonly groupId: string,
    private readonly sink: string,
    private readonly fromBeginning: boolean,
  ) {}

  start(name: string): void {
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/bench/group-member.js')], {
      env: {
        PATH: process.env.PATH ?? '',
        BENCH_GROUP_TOPIC: this.topic,
        BENCH_GROUP_ID: this.groupId,
        BENCH_GROUP_SINK: this.sink,
        BENCH_GROUP_BROKERS: config.kafka.brokers.join(','),
        BENCH_GROUP_MEMBER: name,
        BENCH_GROUP_SESSION_TIMEOUT_MS: String(TTL_MS),
        BENCH_GROUP_FROM_BEGINNING: this.fromBeginning ? '1' : '0',
        // The same signed POSTs as a webhook delivery (every subscription has a signing secret).
        BENCH_GROUP_SIGNING_SECRET: `whsec_${Buffer.alloc(24, 'bench group').toString('base64')}`,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const member: Member = { child, assigned: [], joinedAt: 0 };
    let buffered = '';
    child.stdout!.on('data', (d: Buffer) => {
      buffered += d.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        member.assigned = (JSON.parse(line) as { assigned: number[] }).assigned;
        member.joinedAt = Date.now();
      }
    });
    this.members.set(name, member);
  }

  /** Every live member joined after `since`, and their assignments cover the partitions once. */
  async settled(since: number): Promise<void> {
    await until('the group to settle', () => {
      const live = [...this.members.values()].filter((m) => m.child.exitCode === null && m.child.signalCode === null);
      const all = live.flatMap((m) => m.assigned);
      return live.every((m) => m.joinedAt > since) && all.length === PARTITIONS && new Set(all).size === PARTITIONS
        ? true
        : undefined;
    });
  }

  stop(): void {
    for (const m of this.members.values()) m.child.kill('SIGKILL');
  }
}

// --- the measurements ------------------------------------------------------------------------------------------

async function takeoverOurs(kafka: Kafka, producer: Producer, sink: Sink): Promise<number[]> {
  const topic = `bench-takeover-${randomUUID().slice(0, 8)}`;
  await createTopics(kafka, [topic], PARTITIONS);
  const cluster = new Cluster(topic, `tk${randomUUID().slice(0, 4)}`);
  const names = ['a', 'b', 'c'];
  const load = new Load(producer, topic);
  const times: number[] = [];
  try {
    for (const n of names) await cluster.start(n);
    await cluster.settled(names);
    await cluster.subscribe(sink.url, 'latest');
    load.start();
    await until('deliveries under load', () => (sink.received > LOAD_PER_SECOND ? true : undefined));
    for (let round = 0; round < KILLS; round++) {
      const victim = names[round % names.length];
      const view = await cluster.settled(names);
      const owned = view.partitions
        .filter((p) => p.topic === topic && p.owner === cluster.id(victim))
        .map((p) => p.partition);
      const t0 = Date.now();
      cluster.instances.get(victim)!.child.kill('SIGKILL');
      const firsts = await Promise.all(
        owned.map((p) => until(`partition ${p} to be delivered again`, () => firstDeliveryAfter(sink, p, t0))),
      );
      const took = firsts.map((at) => at - t0);
      times.push(...took);
      console.log(
        `  ours  kill ${round + 1}/${KILLS}: ${victim} owned [${owned.join(', ')}], first delivery by the new owner after ${took.join(', ')} ms`,
      );
      await until('the killed instance to exit', () =>
        cluster.instances.get(victim)!.child.exitCode !== null ||
        cluster.instances.get(victim)!.child.signalCode !== null
          ? true
          : undefined,
      );
      await cluster.start(victim);
    }
  } finally {
    await load.stop();
    await cluster.stop();
  }
  return times;
}

async function takeoverGroup(kafka: Kafka, producer: Producer, sink: Sink): Promise<number[]> {
  const topic = `bench-takeover-group-${randomUUID().slice(0, 8)}`;
  await createTopics(kafka, [topic], PARTITIONS);
  const group = new Group(topic, `bench-takeover-${randomUUID().slice(0, 8)}`, sink.url, false);
  const names = ['a', 'b', 'c'];
  const load = new Load(producer, topic);
  const times: number[] = [];
  try {
    const begun = Date.now();
    for (const n of names) group.start(n);
    await group.settled(begun);
    load.start();
    await until('deliveries under load', () => (sink.received > LOAD_PER_SECOND ? true : undefined));
    for (let round = 0; round < KILLS; round++) {
      const victim = names[round % names.length];
      const owned = [...group.members.get(victim)!.assigned];
      const t0 = Date.now();
      group.members.get(victim)!.child.kill('SIGKILL');
      const firsts = await Promise.all(
        owned.map((p) => until(`partition ${p} to be delivered again`, () => firstDeliveryAfter(sink, p, t0))),
      );
      const took = firsts.map((at) => at - t0);
      times.push(...took);
      console.log(
        `  group kill ${round + 1}/${KILLS}: ${victim} owned [${owned.join(', ')}], first delivery by the new member after ${took.join(', ')} ms`,
      );
      const restarted = Date.now();
      group.start(victim);
      await group.settled(restarted);
    }
  } finally {
    await load.stop();
    group.stop();
  }
  return times;
}

/** Events per second from the first to the last delivery of `ids`. */
async function drainRate(sink: Sink, ids: string[]): Promise<number> {
  await until(`${ids.length} deliveries`, () => (ids.every((id) => sink.firstAt.has(id)) ? true : undefined), 600000);
  const times = ids.map((id) => sink.firstAt.get(id)!);
  return (ids.length - 1) / ((Math.max(...times) - Math.min(...times)) / 1000);
}

async function fill(kafka: Kafka, producer: Producer): Promise<{ topic: string; ids: string[] }> {
  const topic = `bench-owned-tput-${randomUUID().slice(0, 8)}`;
  await createTopics(kafka, [topic], PARTITIONS);
  const ids: string[] = [];
  for (let start = 0; start < THROUGHPUT_EVENTS; start += 600) {
    const messages = [];
    for (let n = start; n < Math.min(THROUGHPUT_EVENTS, start + 600); n++) {
      const id = eventId(topic, n % PARTITIONS, n);
      ids.push(id);
      messages.push({ ...message(id), partition: n % PARTITIONS });
    }
    await producer.send({ topic, acks: -1, messages });
  }
  return { topic, ids };
}

async function throughputOurs(kafka: Kafka, producer: Producer, sink: Sink, count: number): Promise<number> {
  const { topic, ids } = await fill(kafka, producer);
  await resetOwnership();
  const cluster = new Cluster(topic, `tp${randomUUID().slice(0, 4)}`);
  const names = ['a', 'b', 'c'].slice(0, count);
  try {
    for (const n of names) await cluster.start(n);
    await cluster.settled(names);
    await cluster.subscribe(sink.url, 'earliest');
    return await drainRate(sink, ids);
  } finally {
    await cluster.stop();
  }
}

async function throughputGroup(kafka: Kafka, producer: Producer, sink: Sink, count: number): Promise<number> {
  const { topic, ids } = await fill(kafka, producer);
  const group = new Group(topic, `bench-tput-${randomUUID().slice(0, 8)}`, sink.url, true);
  try {
    for (const n of ['a', 'b', 'c'].slice(0, count)) group.start(n);
    return await drainRate(sink, ids);
  } finally {
    group.stop();
  }
}

async function main(): Promise<void> {
  const kafka = new Kafka({ brokers: config.kafka.brokers, clientId: 'bench-takeover', logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  const sink = new Sink();
  await sink.start();
  console.log(
    `takeover benchmark: TTL ${TTL_MS} ms, ${KILLS} SIGKILLs per path, load ${LOAD_PER_SECOND} events/s over ${PARTITIONS} partitions`,
  );
  console.log(
    `machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
  );
  try {
    await resetOwnership();
    const f = (n: number) => n.toFixed(0);
    if (KILLS > 0) {
      const ours = stats(await takeoverOurs(kafka, producer, sink));
      const group = stats(await takeoverGroup(kafka, producer, sink));
      console.log('\n| takeover, kill -> first delivery by the new owner | n | p50 ms | p95 ms | p99 ms | max ms |');
      console.log('|---|---|---|---|---|---|');
      console.log(
        `| eventmesh PARTITION_OWNED_PULL (lease TTL ${TTL_MS} ms) | ${ours.n} | ${f(ours.p50)} | ${f(ours.p95)} | ${f(ours.p99)} | ${f(ours.max)} |`,
      );
      console.log(
        `| kafkajs consumer group (session timeout ${TTL_MS} ms) | ${group.n} | ${f(group.p50)} | ${f(group.p95)} | ${f(group.p99)} | ${f(group.max)} |`,
      );
      console.log(
        `\np99 ratio ours/group: ${(ours.p99 / group.p99).toFixed(2)}x; goal p99 <= ${CRASH_GOAL_MS} ms (a crash is seen by its released liveness lock, not the TTL): ${ours.p99 <= CRASH_GOAL_MS ? 'met' : 'NOT met'}`,
      );
    }
    console.log(
      `\n| throughput, ${THROUGHPUT_EVENTS} events of 1 KiB, webhook delivery | eventmesh events/s | consumer group events/s | ratio |`,
    );
    console.log('|---|---|---|---|');
    for (const count of [1, 2, 3]) {
      const mine = await throughputOurs(kafka, producer, sink, count);
      const theirs = await throughputGroup(kafka, producer, sink, count);
      console.log(`| ${count} instance(s) / member(s) | ${f(mine)} | ${f(theirs)} | ${(mine / theirs).toFixed(2)}x |`);
    }
  } finally {
    await resetOwnership();
    await producer.disconnect();
    await sink.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

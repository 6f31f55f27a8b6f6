import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { Pool } from 'undici';
import { benchEnv, brokerPid, meterCpu, monotonicMs, percentile, startInstanceProcess } from './support';
import type { SubscriberKind } from './stream-subscribers';

/**
 * bench:e2e's client comparison: the raw WebSocket client, `@eventmesh/client`'s consumer and a NestJS
 * `@OnMeshEvent` method, each on a STREAM subscription of its own to one topic of one instance, each in a process of
 * its own (bench/e2e-subscriber.ts), all three receiving the same published events at the same time. Each client's
 * throughput and latency are measured on the same events in the same seconds as the raw client's, so the host's
 * noise (which moves separate runs by tens of milliseconds at p99 here) falls on all three alike, and each
 * process's CPU per event is its own.
 */
export const KINDS: SubscriberKind[] = ['raw', 'sdk', 'nestjs'];

/** Publishes `total` events through `send`, `concurrency` at a time, or paced at `rate` per second. */
export async function drive(
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

/**
 * `send(prefix)(n)` publishes event `${prefix}-${n}` (1 KiB of data, one of 97 partition keys) to `topic` through
 * `http` and records when it was sent in `sentAt`, on the host's monotonic clock.
 */
export function publisherOf(http: Pool, topic: string, sentAt: Map<string, number>) {
  return (prefix: string) => async (n: number) => {
    const id = `${prefix}-${n}`;
    sentAt.set(id, monotonicMs());
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
}

interface Subscriber {
  child: ChildProcess;
  /** Resolves with each event's arrival once all `total` events of the run `prefix` arrived. */
  collect(prefix: string, total: number, deadlineMs: number): Promise<Map<string, number>>;
}

function forkSubscriber(kind: SubscriberKind): Subscriber {
  const child = fork(path.join(__dirname, 'e2e-subscriber.js'), [kind], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const collected = new Map<string, (stamps: [string, number][]) => void>();
  child.on('message', (m: { collected?: string; stamps?: [string, number][] }) => {
    if (m.collected !== undefined) collected.get(m.collected)?.(m.stamps!);
  });
  return {
    child,
    collect: (prefix, total, deadlineMs) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`the ${kind} subscriber did not receive all ${total} events of ${prefix} in time`)),
          deadlineMs,
        );
        collected.set(prefix, (stamps) => {
          clearTimeout(timer);
          collected.delete(prefix);
          resolve(new Map(stamps));
        });
        child.send({ collect: prefix, total });
      }),
  };
}

export interface ClientsPath {
  subscribers: Record<SubscriberKind, Subscriber>;
  send(prefix: string): (n: number) => Promise<void>;
  sentAt: Map<string, number>;
  instancePid?: number;
  close(): Promise<void>;
}

/** One instance, one topic, three STREAM subscriptions and their three subscriber processes, connected. */
export async function clientsPath(topic: string, partitions: number, concurrency: number): Promise<ClientsPath> {
  const instance = await startInstanceProcess(
    benchEnv({
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(partitions),
      EVENTMESH_HTTP_PORT: '0',
      EVENTMESH_INSTANCE_ID: `bench-e2e-clients-${randomUUID().slice(0, 6)}`,
    }),
  );
  const http = new Pool(instance.url, { connections: concurrency });
  const subscribers: Partial<Record<SubscriberKind, Subscriber>> = {};
  const close = async () => {
    await Promise.all(
      Object.values(subscribers).map(
        (s) =>
          new Promise<void>((resolve) => {
            if (s.child.exitCode !== null) return resolve();
            s.child.once('exit', () => resolve());
            s.child.send({ close: true });
            setTimeout(() => s.child.kill('SIGKILL'), 15000).unref();
          }),
      ),
    );
    await http.close();
    await instance.stop();
  };
  try {
    for (const kind of KINDS) {
      // Named, so the NestJS module's ensure finds its subscription by name, as a user's handler does.
      const name = `${topic}-${kind}`;
      const created = await fetch(`${instance.url}/subscriptions/by-name/${name}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ protocol: 'STREAM', topic }),
      });
      if (created.status !== 201) throw new Error(`subscription ${name}: ${created.status} ${await created.text()}`);
      const { id } = (await created.json()) as { id: string };
      const subscriber = forkSubscriber(kind);
      subscribers[kind] = subscriber;
      await new Promise<void>((resolve, reject) => {
        subscriber.child.on('message', (m: { ready?: true; error?: string }) => {
          if (m.ready) resolve();
          if (m.error) reject(new Error(`the ${kind} subscriber: ${m.error}`));
        });
        subscriber.child.once('exit', (code) => reject(new Error(`the ${kind} subscriber exited (${code})`)));
        subscriber.child.send({ start: { url: instance.url, subscriptionId: id, topic, name } });
      });
    }
    const sentAt = new Map<string, number>();
    return {
      subscribers: subscribers as Record<SubscriberKind, Subscriber>,
      sentAt,
      instancePid: instance.child.pid,
      send: publisherOf(http, topic, sentAt),
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/** One client's figures in one run: events/s from the run's start to its last arrival, latencies sorted. */
interface ClientRun {
  perSecond: number;
  latencies: number[];
}

export interface ClientsRound {
  full: Record<SubscriberKind, ClientRun>;
  half: Record<SubscriberKind, ClientRun>;
  /** The offered half load, events/s: half the raw client's full-speed rate of this round. */
  halfRate: number;
  /** CPU seconds of the full-speed run per process. */
  cpu: Record<string, number>;
}

async function run(path: ClientsPath, prefix: string, total: number, opts: { concurrency?: number; rate?: number }) {
  const started = monotonicMs();
  await drive(total, path.send(prefix), opts);
  const out: Partial<Record<SubscriberKind, ClientRun>> = {};
  await Promise.all(
    KINDS.map(async (kind) => {
      const stamps = await path.subscribers[kind].collect(prefix, total, 180000);
      const last = Math.max(...stamps.values());
      out[kind] = {
        perSecond: total / ((last - started) / 1000),
        latencies: [...stamps].map(([id, at]) => at - path.sentAt.get(id)!).sort((a, b) => a - b),
      };
    }),
  );
  return out as Record<SubscriberKind, ClientRun>;
}

/** A warm-up, a full-speed run (CPU metered per process), then a run paced at half the raw client's rate. */
export async function measureClients(
  path: ClientsPath,
  round: number,
  events: number,
  concurrency: number,
): Promise<ClientsRound> {
  await run(path, `c${round}-warm`, 500, { concurrency });
  const cpu = meterCpu({
    instance: path.instancePid,
    raw: path.subscribers.raw.child.pid,
    sdk: path.subscribers.sdk.child.pid,
    nestjs: path.subscribers.nestjs.child.pid,
    publishers: 'self',
    broker: brokerPid(),
  });
  const full = await run(path, `c${round}-full`, events, { concurrency });
  const used = cpu();
  const halfRate = full.raw.perSecond / 2;
  const half = await run(path, `c${round}-half`, events, { rate: halfRate });
  return { full, half, halfRate, cpu: used };
}

/** Prints every round and the medians against the goals: SDK >= 0.95x and <= 2 ms added p99; NestJS >= 0.9x. */
export function reportClients(rounds: ClientsRound[], events: number): void {
  const p = (r: ClientRun, q: number) => percentile(r.latencies, q);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const ratio = (r: ClientsRound, kind: SubscriberKind) => r.full[kind].perSecond / r.full.raw.perSecond;
  const added = (r: ClientsRound, kind: SubscriberKind) => p(r.half[kind], 99) - p(r.half.raw, 99);
  const us = (r: ClientsRound, name: string) =>
    Number.isFinite(r.cpu[name]) ? Math.round((r.cpu[name] / events) * 1e6) : NaN;
  console.log(
    `\nClients on one instance, the same events at once (three STREAM subscriptions of one topic, each client in its own process; ${events} events a run):\n`,
  );
  console.log(
    '| round | raw / sdk / nestjs events/s, full speed | sdk / raw | nestjs / raw | half load offered | p50 ms raw / sdk / nestjs | p99 ms raw / sdk / nestjs | added p99 ms sdk / nestjs | CPU µs/event raw / sdk / nestjs process | instance | publishers | broker | host |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  rounds.forEach((r, n) =>
    console.log(
      `| ${n + 1} | ${KINDS.map((k) => r.full[k].perSecond.toFixed(0)).join(' / ')} | ${ratio(r, 'sdk').toFixed(2)}x | ${ratio(r, 'nestjs').toFixed(2)}x | ${r.halfRate.toFixed(0)}/s | ${KINDS.map((k) => p(r.half[k], 50).toFixed(1)).join(' / ')} | ${KINDS.map((k) => p(r.half[k], 99).toFixed(1)).join(' / ')} | ${added(r, 'sdk').toFixed(1)} / ${added(r, 'nestjs').toFixed(1)} | ${KINDS.map((k) => us(r, k)).join(' / ')} | ${us(r, 'instance')} | ${us(r, 'publishers')} | ${us(r, 'broker')} | ${us(r, 'host')} |`,
    ),
  );
  console.log(
    `\nSDK consumer against the raw WebSocket client: throughput median ${median(rounds.map((r) => ratio(r, 'sdk'))).toFixed(2)}x (goal >= 0.95x); added p99 at half load median ${median(rounds.map((r) => added(r, 'sdk'))).toFixed(1)} ms (goal <= 2 ms)`,
  );
  console.log(
    `NestJS @OnMeshEvent method against the raw WebSocket client: throughput median ${median(rounds.map((r) => ratio(r, 'nestjs'))).toFixed(2)}x (goal >= 0.9x); added p99 at half load median ${median(rounds.map((r) => added(r, 'nestjs'))).toFixed(1)} ms (no goal)`,
  );
  console.log(
    `CPU per event of the client process, median: raw ${median(rounds.map((r) => us(r, 'raw')))} µs, sdk ${median(rounds.map((r) => us(r, 'sdk')))} µs, nestjs ${median(rounds.map((r) => us(r, 'nestjs')))} µs`,
  );
}

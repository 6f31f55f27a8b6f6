import { FaultInstance } from './cluster';
import { FaultProxy } from './fault-proxy';
import { FaultRun } from './fault-run';
import { killKafka, restoreServers, startKafka, startPostgres, stopPostgresImmediately } from './servers';
import { sleep } from './workload';

export interface ChaosOptions {
  minutes: number;
  instances: number;
  ratePerSecond: number;
  /** Longest wait for delivery to drain after the faults stop. */
  drainSeconds: number;
  /** Seed of the fault schedule (printed, so a run can be repeated). */
  seed: number;
  /** Settings of every instance: the database and namespace of the run. */
  env: Record<string, string>;
  /** Leave out the faults of the shared servers (broker kill, Postgres stop). */
  noServerFaults?: boolean;
}

/** A small seeded generator (mulberry32), so a schedule can be replayed from its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Fault {
  name: string;
  /** Injects the fault; resolves with how to undo it. */
  inject(): Promise<() => Promise<void>>;
}

const log = (message: string) => process.stdout.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

/**
 * `npm run chaos -- --minutes N`: instances under a publishing workload with subscribers on every transport, and
 * a random schedule of faults, one at a time, each undone before the next: latency, cut, half-open hold and reset
 * on the Postgres, Temporal and Kafka links (fault proxies), instance SIGKILL and restart, SIGSTOP and SIGCONT,
 * broker `kill -9` and restart, Postgres immediate stop and start. Then the faults stop, delivery drains (with a
 * deadline) and the checker's table is printed. Resolves with the exit code: 1 when anything acknowledged was
 * lost (or order broken), else 0.
 */
export async function runChaos(options: ChaosOptions): Promise<number> {
  const rnd = random(options.seed);
  const pick = <T>(list: T[]): T => list[Math.floor(rnd() * list.length)];
  const between = (lo: number, hi: number) => Math.round(lo + rnd() * (hi - lo));
  const n = options.instances;
  // Every instance but the last reaches Postgres and Temporal through its own proxy and Kafka through the shared
  // one; the last is direct, so some publishes always have a path while a link is down.
  const run = new FaultRun({
    name: 'chaos',
    instances: Array.from({ length: n }, (_, i) =>
      i < n - 1 ? { proxyPostgres: true, proxyTemporal: true, kafkaViaProxy: true } : {},
    ),
    subscribers: [
      ...Array.from({ length: n }, (_, i) => ({ transport: 'webhook' as const, on: i })),
      { transport: 'websocket', on: 0 },
      { transport: 'sse', on: 1 % n },
      { transport: 'long-poll', on: 2 % n },
    ],
    publishers: 6,
    keysPerPublisher: 4,
    ratePerSecond: options.ratePerSecond,
    attemptTimeoutMs: 5000,
    env: options.env,
  });
  const stop = async () => {
    log('interrupted: undoing faults and stopping everything');
    await undoAll(run).catch(() => undefined);
    await run.close().catch(() => undefined);
    process.exit(130);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());

  log(`seed ${options.seed}, ${options.minutes} min, ${n} instances, ${options.ratePerSecond} events/s`);
  try {
    await run.start();
    log(`started: topic ${run.topic}, instances ${run.instances.map((i) => `${i.id}@${i.url}`).join(', ')}`);
    await run.acknowledgedMore(50, 60000);

    const links = (): { name: string; proxy: FaultProxy }[] => [
      ...(run.kafka ? [{ name: 'kafka', proxy: run.kafka }] : []),
      ...run.instances.flatMap((i) => [
        ...(i.postgres ? [{ name: `postgres@${i.id}`, proxy: i.postgres }] : []),
        ...(i.temporal ? [{ name: `temporal@${i.id}`, proxy: i.temporal }] : []),
      ]),
    ];
    const linkFault = (kind: 'latency' | 'cut' | 'hold' | 'reset'): Fault => {
      const link = pick(links());
      const ms = between(500, 2000);
      return {
        name: `${kind}${kind === 'latency' ? ` ${ms} ms` : ''} on ${link.name}`,
        inject: async () => {
          if (kind === 'latency') link.proxy.latency(ms);
          else if (kind === 'cut') link.proxy.cut();
          else if (kind === 'hold') link.proxy.hold();
          else link.proxy.reset();
          return async () => link.proxy.heal();
        },
      };
    };
    const instanceFault = (kind: 'kill' | 'pause'): Fault => {
      const instance: FaultInstance = pick(run.instances.filter((i) => i.state === 'up'));
      return {
        name: `${kind === 'kill' ? 'SIGKILL' : 'SIGSTOP'} ${instance.id}`,
        inject: async () => {
          if (kind === 'kill') {
            await instance.kill();
            return () => instance.restart();
          }
          instance.pause();
          return async () => instance.resume();
        },
      };
    };
    const serverFaults: Fault[] = options.noServerFaults
      ? []
      : [
          { name: 'Kafka broker kill -9', inject: async () => (await killKafka(), () => startKafka()) },
          {
            name: 'Postgres stop -m immediate',
            inject: async () => (await stopPostgresImmediately(), () => startPostgres()),
          },
        ];
    const kinds: (() => Fault)[] = [
      () => linkFault('latency'),
      () => linkFault('cut'),
      () => linkFault('hold'),
      () => linkFault('reset'),
      () => instanceFault('kill'),
      () => instanceFault('pause'),
      ...serverFaults.map((f) => () => f),
    ];

    const endAt = Date.now() + options.minutes * 60000;
    const maxFaults = Math.max(1, Math.ceil(options.minutes * 12));
    const done: string[] = [];
    while (Date.now() < endAt && done.length < maxFaults) {
      const fault = pick(kinds)();
      const holdMs = between(2000, 10000);
      log(
        `fault ${done.length + 1}: ${fault.name} for ${holdMs} ms (acknowledged so far ${run.workload.acknowledged})`,
      );
      const undo = await fault.inject();
      await sleep(Math.min(holdMs, Math.max(0, endAt - Date.now())));
      await undo().catch((e) =>
        log(`undoing ${fault.name} failed (retried after the schedule): ${(e as Error).message}`),
      );
      done.push(fault.name);
      const calmMs = between(2000, 8000);
      log(`healed; calm for ${calmMs} ms`);
      await sleep(Math.min(calmMs, Math.max(0, endAt - Date.now())));
    }
    log(`faults over (${done.length}); draining for at most ${options.drainSeconds} s`);
    await undoAll(run);
    const result = await run.finish(options.drainSeconds * 1000);
    process.stdout.write(`\nfaults injected (${done.length}): ${done.join('; ')}\n\n${result.table}\n`);
    return result.lost > 0 || !result.valid ? 1 : 0;
  } finally {
    await undoAll(run).catch((e) => log(`restoring the servers failed: ${(e as Error).message}`));
    await run.close();
  }
}

/** Heals every link, resumes and restarts instances, and brings the servers back: the state before the faults. */
async function undoAll(run: FaultRun): Promise<void> {
  run.kafka?.heal();
  for (const i of run.instances) {
    i.postgres?.heal();
    i.temporal?.heal();
  }
  await restoreServers();
  for (const i of run.instances) {
    if (i.state === 'paused') i.resume();
    if (i.state === 'killed') await i.restart().catch(() => i.restart());
  }
}

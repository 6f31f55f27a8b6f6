import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { check, CheckResult, formatTable } from './checker';
import {
  dispatchActivityOf,
  endDispatchWorkflows,
  FaultInstance,
  KAFKA_FAULTS_ADVERTISED_PORT,
  KAFKA_FAULTS_TARGET,
} from './cluster';
import { FaultProxy } from './fault-proxy';
import { parsePrometheusText } from '../support/prometheus-text';
import {
  deadLetterCount,
  drain,
  LongPollSubscriber,
  SseSubscriber,
  Subscriber,
  WebhookSubscriber,
  WebSocketSubscriber,
} from './subscribers';
import { sleep, Workload } from './workload';

export type Transport = 'webhook' | 'websocket' | 'sse' | 'long-poll';

/** The load of the CI cases: 4 publishers at 100 events/s in all, each publish attempt given 5 s. */
export const CI_LOAD = { publishers: 4, ratePerSecond: 100, attemptTimeoutMs: 5000 } as const;

export interface FaultRunOptions {
  /** A name for ids and topics. */
  name: string;
  /** One entry per instance: its proxies. */
  instances: { proxyPostgres?: boolean; proxyTemporal?: boolean; kafkaViaProxy?: boolean }[];
  /** Subscriptions, each created on (and dispatched by) instance `on` (default 0). */
  subscribers: { transport: Transport; on?: number }[];
  publishers?: number;
  keysPerPublisher?: number;
  ratePerSecond?: number;
  partitions?: number;
  /** Settings for every instance (EVENTMESH_*), e.g. the database and namespace of a script run. */
  env?: Record<string, string>;
  /** Publish to these instances only (default: every instance that is up). */
  publishTo?: number[];
  attemptTimeoutMs?: number;
}

export interface FaultRunResult extends CheckResult {
  answers: Record<string, number>;
  drained: boolean;
  deadLetters: Record<string, number>;
  table: string;
}

/**
 * One fault run: instances (with their proxies), the shared Kafka proxy when any instance uses it, the workload's
 * subscriptions on every transport asked for, and the publishers. A test or the chaos script injects faults
 * between {@link start} and {@link finish}; finish stops publishing, waits for delivery to drain (with a
 * deadline), and runs the checker. {@link close} ends every process, proxy and workflow the run started.
 */
export class FaultRun {
  readonly runId = randomUUID().slice(0, 8);
  readonly topic: string;
  readonly instances: FaultInstance[] = [];
  readonly subscribers: Subscriber[] = [];
  kafka?: FaultProxy;
  workload!: Workload;
  /** What GET /health answered during the run, per instance: `HTTP status postgres/kafka/temporal` -> count. */
  readonly health: Record<string, Record<string, number>> = {};
  private healthTimer?: NodeJS.Timeout;
  /** Workloads that ran before the current one (their events are checked too). */
  private readonly earlier: Workload[] = [];

  constructor(readonly options: FaultRunOptions) {
    this.topic = `faults-${options.name}-${this.runId}`;
  }

  /** Starts the instances, creates the subscriptions, and starts publishing. */
  async start(): Promise<void> {
    if (this.options.instances.some((i) => i.kafkaViaProxy)) {
      this.kafka = new FaultProxy(KAFKA_FAULTS_TARGET.host, KAFKA_FAULTS_TARGET.port, {
        listenPort: KAFKA_FAULTS_ADVERTISED_PORT,
      });
      await this.kafka.start();
    }
    const env = {
      EVENTMESH_KAFKA_TOPICS: this.topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(this.options.partitions ?? 3),
      ...this.options.env,
    };
    this.options.instances.forEach((links, n) => {
      this.instances.push(
        new FaultInstance({
          id: `faults-${this.runId}-${n}`,
          env,
          proxyPostgres: links.proxyPostgres,
          proxyTemporal: links.proxyTemporal,
          kafkaProxy: links.kafkaViaProxy ? this.kafka : undefined,
        }),
      );
    });
    // One at a time: the first creates the topic, and boots on two shared cores go faster in turn.
    for (const instance of this.instances) await instance.start();
    for (const [n, s] of this.options.subscribers.entries()) {
      const instance = this.instances[s.on ?? 0];
      const name = `${s.transport}-i${s.on ?? 0}-${n}`;
      const subscriber = {
        webhook: WebhookSubscriber,
        websocket: WebSocketSubscriber,
        sse: SseSubscriber,
        'long-poll': LongPollSubscriber,
      }[s.transport];
      const sub = new subscriber(name);
      await sub.start(() => instance.api, this.topic);
      this.subscribers.push(sub);
    }
    this.workload = this.newWorkload(this.runId, this.options.ratePerSecond);
    this.workload.start();
    this.healthTimer = setInterval(() => void this.sampleHealth(), 1000);
  }

  /** One /health answer of each instance that is up (a stopped one cannot answer). */
  private async sampleHealth(): Promise<void> {
    await Promise.all(
      this.instances.map(async (i) => {
        if (!i.api) return;
        let seen: string;
        try {
          const response = await fetch(`${i.api}/health`, { signal: AbortSignal.timeout(3000) });
          const body = (await response.json()) as { dependencies?: Record<string, { status: string }> };
          const d = body.dependencies ?? {};
          seen = `${response.status} pg:${d.postgres?.status} kafka:${d.kafka?.status} temporal:${d.temporal?.status}`;
        } catch (e) {
          seen = (e as Error).name === 'TimeoutError' ? 'no answer in 3 s' : 'refused';
        }
        const counts = (this.health[i.id] ??= {});
        counts[seen] = (counts[seen] ?? 0) + 1;
      }),
    );
  }

  /** Stops the workload and starts another at `ratePerSecond` (new ids; the earlier events are still checked). */
  async restartWorkload(ratePerSecond: number | undefined): Promise<void> {
    await this.workload.stop();
    this.earlier.push(this.workload);
    this.workload = this.newWorkload(`${this.runId}-w${this.earlier.length}`, ratePerSecond);
    this.workload.start();
  }

  private newWorkload(runId: string, ratePerSecond: number | undefined): Workload {
    const publishTo = this.options.publishTo;
    return new Workload({
      runId,
      topic: this.topic,
      publishers: this.options.publishers ?? 4,
      keysPerPublisher: this.options.keysPerPublisher ?? 4,
      ratePerSecond,
      attemptTimeoutMs: this.options.attemptTimeoutMs,
      targets: () =>
        this.instances.filter((_, n) => !publishTo || publishTo.includes(n)).flatMap((i) => (i.api ? [i.api] : [])),
    });
  }

  /** Ids acknowledged by every workload of the run. */
  acknowledgedIds(): string[] {
    return [...this.earlier, this.workload].flatMap((w) => w.acknowledgedIds());
  }

  /** Waits until `count` more events were acknowledged (load is flowing), within `timeoutMs`. */
  async acknowledgedMore(count: number, timeoutMs = 30000): Promise<void> {
    const target = this.workload.acknowledged + count;
    const deadline = Date.now() + timeoutMs;
    while (this.workload.acknowledged < target) {
      if (Date.now() >= deadline)
        throw new Error(
          `only ${this.workload.acknowledged} of ${target} events acknowledged within ${timeoutMs} ms (answers ${JSON.stringify(this.workload.answers)})`,
        );
      await sleep(100);
    }
  }

  /** Waits until every subscriber has received every event acknowledged so far, within `timeoutMs`. */
  async delivered(timeoutMs: number): Promise<boolean> {
    return drain(this.subscribers, this.acknowledgedIds(), timeoutMs);
  }

  /** Stops publishing, lets delivery drain for at most `drainMs`, and checks what arrived. */
  async finish(drainMs: number): Promise<FaultRunResult> {
    clearInterval(this.healthTimer);
    await this.workload.stop();
    const drained = await this.delivered(drainMs);
    const answers: Record<string, number> = {};
    for (const w of [...this.earlier, this.workload])
      for (const [a, c] of Object.entries(w.answers)) answers[a] = (answers[a] ?? 0) + c;
    const result = check(
      [...this.earlier, this.workload].flatMap((w) => w.log()),
      this.subscribers.map((s) => s.log()),
    );
    const deadLetters: Record<string, number> = {};
    for (const [n, s] of this.subscribers.entries()) {
      const api = this.instances[this.options.subscribers[n].on ?? 0].api;
      deadLetters[s.name] =
        api && s.subscriptionId ? await deadLetterCount(api, s.subscriptionId).catch(() => NaN) : NaN;
    }
    const sessions = Object.fromEntries(this.subscribers.flatMap((s) => ('ends' in s ? [[s.name, s.ends]] : [])));
    const table = [
      formatTable(result),
      `stream sessions ended: ${JSON.stringify(sessions)}`,
      `publish answers: ${JSON.stringify(answers)}; drained: ${drained}; dead letters: ${JSON.stringify(deadLetters)}`,
      ...this.instances.map(
        (i) => `${i.id}: /health ${JSON.stringify(this.health[i.id] ?? {})}; logged ${JSON.stringify(i.warnings())}`,
      ),
      ...(result.lost > 0 || !drained ? await this.diagnosis() : []),
    ].join('\n');
    return { ...result, answers, drained, deadLetters, table };
  }

  /**
   * What a case that lost events or did not drain prints of each instance, so a failure far away (CI) can be read
   * from its output alone: its dispatch activity as Temporal sees it, what its /metrics say of the loops and the
   * lanes, and its warning timeline.
   */
  private async diagnosis(): Promise<string[]> {
    const env = this.options.env ?? {};
    const out: string[] = [];
    for (const i of this.instances) {
      const activity = await dispatchActivityOf(env, i.id).catch((e: unknown) => `unreadable: ${(e as Error).message}`);
      out.push(`${i.id}: dispatch activity ${JSON.stringify(activity ?? 'none pending')}`);
      out.push(`${i.id}: metrics ${i.api ? await dispatchMetricsOf(i.api) : 'instance down'}`);
      out.push(`${i.id}: timeline (warnings and errors, the last 40):`, ...i.timeline(40).map((l) => `  ${l}`));
    }
    return out;
  }

  /** Ends everything the run started: publishers, subscribers, instances, proxies, dispatch workflows. */
  async close(): Promise<void> {
    clearInterval(this.healthTimer);
    await this.workload?.stop().catch(() => undefined);
    await Promise.all(this.subscribers.map((s) => s.stop().catch(() => undefined)));
    await Promise.all(this.instances.map((i) => i.stop().catch(() => undefined)));
    if (process.env.FAULTS_LOG_DIR) {
      for (const i of this.instances) writeFileSync(path.join(process.env.FAULTS_LOG_DIR, `${i.id}.log`), i.output());
    }
    await this.kafka?.stop();
    await endDispatchWorkflows(
      this.options.env ?? {},
      this.instances.map((i) => i.id),
    ).catch(() => undefined);
  }
}

/** What an instance's /metrics say of its dispatch loops and lanes (summed over subscriptions and partitions). */
async function dispatchMetricsOf(api: string): Promise<string> {
  try {
    const response = await fetch(`${api}/metrics`, { signal: AbortSignal.timeout(3000) });
    if (!response.ok) return `HTTP ${response.status}`;
    const { samples } = parsePrometheusText(await response.text());
    const sum = (name: string) => samples.filter((x) => x.name === name).reduce((n, x) => n + x.value, 0);
    const attempts: Record<string, number> = {};
    for (const x of samples.filter((y) => y.name === 'eventmesh_delivery_attempts_total')) {
      attempts[x.labels.outcome ?? '?'] = (attempts[x.labels.outcome ?? '?'] ?? 0) + x.value;
    }
    return JSON.stringify({
      loops: sum('eventmesh_dispatch_loops'),
      lastRoundAgeS: Math.max(
        0,
        ...samples.filter((x) => x.name === 'eventmesh_dispatch_last_round_age_seconds').map((x) => x.value),
      ),
      lag: sum('eventmesh_delivery_lag_events'),
      circuitsNotClosed: samples.filter((x) => x.name === 'eventmesh_delivery_circuit_state' && x.value !== 0).length,
      retryParked: sum('eventmesh_delivery_retry_parked'),
      attempts,
    });
  } catch (e) {
    return `unreadable: ${(e as Error).message}`;
  }
}

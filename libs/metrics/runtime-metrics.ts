import { collectDefaultMetrics, Registry } from 'prom-client';
import { createLogger } from '@libs/logging';
import { reasonOf } from '@libs/runtime';
import { SharedRead } from '@libs/runtime';
import { defineMetrics, EventMeshMetricSet } from './metric-definitions';
import type { StoredCounts } from '@libs/storage';
import type { MetricSources } from './metric-sources';
import { scrapeTemporal } from './temporal-telemetry';

/** How long one read of the stored counts serves scrapes (two table counts: not on every scrape). */
const STORED_COUNTS_TTL_MS = 10_000;
/** How long a scrape waits for the Temporal core's exporter. */
const TEMPORAL_SCRAPE_TIMEOUT_MS = 1000;

/** What a sink answered, as the failure policy sees it (libs/delivery WebhookResult). */
export interface AttemptAnswer {
  ok: boolean;
  gone?: boolean;
  notAttempted?: boolean;
  rejected?: boolean;
}

/**
 * One instance's metrics: its own registry (no global state: several instances in one process, as the tests run
 * them, keep theirs apart), Node's default series (event-loop lag, heap, GC), the series of metric-definitions.ts,
 * and the methods the decision points call. `scrape` renders the Prometheus text format, with the Temporal core's
 * series appended when the worker installed its exporter. Absent (EVENTMESH_METRICS_ENABLED=false), nothing
 * records: every call site is `metrics?.x()`.
 */
export class RuntimeMetrics {
  readonly registry = new Registry();
  readonly sources: MetricSources = {};
  private readonly m: EventMeshMetricSet;
  private readonly log = createLogger('Metrics');
  private temporalAddress?: string;
  private readStored?: () => Promise<StoredCounts | undefined>;
  // The children of the hot paths' label sets, made once.
  private readonly accepted;
  private readonly publishAccepted;
  /** Per delivery attempt: the children by transport and outcome (a few of each), made at first use. */
  private readonly attemptsBy = new Map<string, ReturnType<EventMeshMetricSet['deliveryAttempts']['labels']>>();
  private readonly publishToAckBy = new Map<string, ReturnType<EventMeshMetricSet['publishToAck']['labels']>>();

  /** `storedCountsTtlMs`: how long one read of the stored counts serves scrapes (tests shorten it). */
  constructor(private readonly storedCountsTtlMs = STORED_COUNTS_TTL_MS) {
    collectDefaultMetrics({ register: this.registry });
    this.m = defineMetrics(this.registry, this.sources);
    this.accepted = this.m.publishRequests.labels({ outcome: 'accepted' });
    this.publishAccepted = this.m.publishDuration.labels({ result: 'accepted' });
  }

  /**
   * Table counts and fences from Postgres, one read shared by every collector of a scrape and by the scrapes of the
   * next 10 s. A failed read is counted once, and the series keep the values of the last read that succeeded.
   */
  readStoredCounts(read: () => Promise<StoredCounts>): void {
    const shared = new SharedRead<StoredCounts | undefined>(
      () =>
        read().catch((e: unknown) => {
          this.m.scrapeErrors.inc({ source: 'postgres' });
          this.log.warn(
            { error: reasonOf(e) },
            'stored counts could not be read; their series keep the last values read',
          );
          return undefined;
        }),
      this.storedCountsTtlMs,
    );
    this.readStored = () => shared.get();
  }

  /** The Temporal core's exporter this process installed (worker-host.ts); its text joins every scrape. */
  setTemporalAddress(bindAddress: string | undefined): void {
    this.temporalAddress = bindAddress;
  }

  /** An accepted publish request: its events and body bytes, and how long it took. */
  published(events: number, bytes: number, seconds: number): void {
    this.accepted.inc();
    this.m.publishEvents.inc(events);
    this.m.publishBytes.inc(bytes);
    this.publishAccepted.observe(seconds);
    this.m.publishBatchEvents.observe(events);
  }

  /** A refused or failed publish request: its error code and status; `code` undefined when the client left unanswered. */
  publishFailed(code: string | undefined, status: number, seconds: number): void {
    this.m.publishRequests.inc({ outcome: code === undefined ? 'client_gone' : code.toLowerCase() });
    if (code !== undefined) this.m.publishDuration.observe({ result: status < 500 ? 'refused' : 'failed' }, seconds);
  }

  /** One Kafka produce request, acknowledged or failed. */
  produced(events: number, bytes: number, seconds: number, acked: boolean): void {
    this.m.produceDuration.observe({ result: acked ? 'acked' : 'failed' }, seconds);
    this.m.produceBatchEvents.observe(events);
    this.m.produceBytes.inc(bytes);
  }

  /**
   * A sink's answer to one delivery attempt. `protocol` is the subscription's (HTTP: webhook; STREAM: stream);
   * `publishedAt` the event's Kafka record time (epoch ms), when known.
   */
  attempted(protocol: string, answer: AttemptAnswer, publishedAt?: number): void {
    const transport = protocol === 'STREAM' ? 'stream' : protocol === 'HTTP' ? 'webhook' : protocol.toLowerCase();
    const outcome = answer.ok
      ? 'delivered'
      : answer.gone
        ? 'gone'
        : answer.notAttempted
          ? 'not_attempted'
          : answer.rejected
            ? 'rejected'
            : 'failed';
    const key = `${transport}/${outcome}`;
    let attempts = this.attemptsBy.get(key);
    if (!attempts) this.attemptsBy.set(key, (attempts = this.m.deliveryAttempts.labels({ transport, outcome })));
    attempts.inc();
    if (answer.ok && publishedAt !== undefined && publishedAt > 0) {
      let acks = this.publishToAckBy.get(transport);
      if (!acks) this.publishToAckBy.set(transport, (acks = this.m.publishToAck.labels({ transport })));
      acks.observe(Math.max(0, Date.now() - publishedAt) / 1000);
    }
  }

  parked(): void {
    this.m.deliveryParked.inc();
  }

  deadLettered(): void {
    this.m.deliveryDeadLettered.inc();
  }

  breakerOpened(): void {
    this.m.breakerOpenings.inc();
  }

  /** A streaming session open: `opened`, or the refusal's code (lower case). */
  sessionOpened(outcome: string): void {
    this.m.sessionsOpened.inc({ outcome });
  }

  /** A chunk an agent sent into a session (counted where the agent's replica is held). */
  sessionChunk(bytes: number): void {
    this.m.sessionChunks.inc();
    this.m.sessionChunkBytes.inc(bytes);
  }

  sessionStall(): void {
    this.m.sessionStalls.inc();
  }

  /** A session or a call ended by an error: its code (lower case). */
  sessionError(code: string): void {
    this.m.sessionErrors.inc({ code });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * The Prometheus text of this instance, the Temporal core's series appended (left out, and counted, when it does
   * not answer). `subscriptionLabels` false: the samples labelled with a subscription id (a tenant's) are left out.
   */
  async scrape({ subscriptionLabels = true }: { subscriptionLabels?: boolean } = {}): Promise<string> {
    let temporal = '';
    if (this.temporalAddress) {
      try {
        temporal = await scrapeTemporal(this.temporalAddress, TEMPORAL_SCRAPE_TIMEOUT_MS);
      } catch (e) {
        this.m.scrapeErrors.inc({ source: 'temporal' });
        this.log.warn(
          { address: this.temporalAddress, error: reasonOf(e) },
          "the Temporal core's metrics could not be read; left out of this scrape",
        );
      }
    }
    // The stored counts are read (or reused) once per scrape, before the collectors run: they all see that answer,
    // and a failed read is counted in this scrape's error series (the collectors render concurrently).
    const stored = await this.readStored?.();
    this.sources.storedCounts = () => Promise.resolve(stored);
    const all = await this.registry.metrics();
    const own = subscriptionLabels ? all : withoutSubscriptionSamples(all);
    if (temporal === '') return own;
    return `${own.endsWith('\n') ? own : `${own}\n`}${temporal.endsWith('\n') ? temporal : `${temporal}\n`}`;
  }

  /** Every series name this registry renders (histograms with their _bucket, _sum and _count), for the dashboard check. */
  async seriesNames(): Promise<Set<string>> {
    const names = new Set<string>();
    for (const metric of await this.registry.getMetricsAsJSON()) {
      const type = String(metric.type);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(metric.name + suffix);
      else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(metric.name + suffix);
      else names.add(metric.name);
    }
    return names;
  }
}

/** The text without its samples labelled `subscription` (their HELP and TYPE lines stay: the series exist, empty). */
function withoutSubscriptionSamples(text: string): string {
  return text
    .split('\n')
    .filter((line) => line.startsWith('#') || !/[{,]subscription="/.test(line))
    .join('\n');
}

import type { StoredCounts } from '@libs/storage';

/**
 * Where the series read at scrape time come from: totals and depths the components already keep (for /health),
 * handed in by the instance's composition (instance.ts, gateway-server.ts, worker-host.ts) as the components
 * start. A source not handed in (a role this process does not run) leaves its series out.
 *
 * The shapes below are what metrics reads, declared here: metrics imports none of the components it measures
 * (each component's own stats type is checked against these where the composition hands it in), so the components
 * may use metrics without a cycle. What it reads from Postgres is storage's `StoredCounts`: storage is below metrics.
 */
export interface MetricSources {
  producer?: () => ProducerDepthView;
  loops?: { values(): LoopView[] };
  gates?: () => Record<'ingress' | 'admin', GateStatsView>;
  requestReply?: () => RequestReplyView;
  ownership?: () => { confirmed: boolean; joins: number };
  orphans?: () => { orphans: number; taken: number };
  /** Table sizes and fence state from Postgres, as this scrape read them (RuntimeMetrics.readStoredCounts: one read per 10 s). */
  storedCounts?: () => Promise<StoredCounts | undefined>;
  /** Streaming sessions of the gateway process (libs/sessions SessionServer.stats). */
  sessions?: () => { callers: number; replicas: number };
  /** The Postgres pool's checkouts, as its leak detection keeps them (undefined while it is off). */
  postgresPool?: () => { checkedOut: number; leaks: number } | undefined;
}

/** The Kafka producer's held events and bytes and its refusals (libs/kafka `ProducerDepth`). */
export interface ProducerDepthView {
  events: number;
  bytes: number;
  queuedEvents: number;
  inFlightRequests: number;
  shed: number;
  timedOut: number;
}

/** A running dispatch loop (libs/delivery `ObservedLoop`). */
export interface LoopView {
  readonly lastRoundAt: number;
  readonly scope?: { topic: string; partition: number };
  laneLags(): { subscriptionId: string; topic: string; partition: number; lag: number }[];
  breakerStates(): { subscriptionId: string; state: 'CLOSED' | 'OPEN' | 'HALF_OPEN' }[];
}

/** A gate's decisions and its audit sink's writes (libs/security `GateStats`). */
export interface GateStatsView {
  allowed: number;
  denied: Record<string, number>;
  errors: Record<string, number>;
  audit?: AuditView;
}

/** The audit sink's writes (libs/security `AuditSinkStats`). */
export interface AuditView {
  sink: string;
  status: 'up' | 'degraded';
  written: number;
  failed: number;
  dropped: number;
}

/** Request-reply's waiting requests and outcomes (libs/request-reply `RequestReplyStats` is this type). */
export interface RequestReplyView {
  pending: number;
  replied: number;
  timedOut: number;
  /** Replies that found no request waiting (too late, or an unknown correlation id), dropped. */
  lateReplies: number;
  /** Of those, replies to a request whose holding process is gone (crashed before its deadline). */
  requesterGone: number;
  /** Requests refused because `maxPending` were waiting. */
  refused: number;
  /** Requests refused because their tenant had `maxPendingPerTenant` waiting. */
  refusedForTenant: number;
}

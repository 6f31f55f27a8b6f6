import type { ObservedLoop } from '../delivery/running-loops';
import type { ProducerDepth } from '../kafka/event-producer';
import type { RequestReplyStats } from '../request-reply/request-reply.service';
import type { GateStats } from '../security/security-gate';
import type { PoolCheckoutStats } from '../storage/pool-leak-detection';
import type { StoredCounts } from '../storage/stored-counts';
import type { OrphanTakeoverStatus } from '../subscriptions/orphan-takeover';

/**
 * Where the series read at scrape time come from: totals and depths the components already keep (for /health),
 * handed in by the instance's composition (instance.ts, gateway-server.ts, worker-host.ts) as the components
 * start. A source not handed in (a role this process does not run) leaves its series out.
 */
export interface MetricSources {
  producer?: () => ProducerDepth;
  loops?: { values(): ObservedLoop[] };
  gates?: () => Record<'ingress' | 'admin', Pick<GateStats, 'allowed' | 'denied' | 'errors' | 'audit'>>;
  requestReply?: () => RequestReplyStats;
  ownership?: () => { confirmed: boolean; joins: number };
  orphans?: () => Pick<OrphanTakeoverStatus, 'orphans' | 'taken'>;
  /** Table sizes and fence state from Postgres, as this scrape read them (RuntimeMetrics.readStoredCounts: one read per 10 s). */
  storedCounts?: () => Promise<StoredCounts | undefined>;
  /** Streaming sessions of the gateway process (libs/sessions SessionServer.stats). */
  sessions?: () => { callers: number; replicas: number };
  /** The Postgres pool's checkouts, as its leak detection keeps them (undefined while it is off). */
  postgresPool?: () => PoolCheckoutStats | undefined;
}

import type { EventMeshConfig } from '@libs/config';
import { ErrorCode } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { ALLOW, GateContext, GateFilter, GateRefusal, Verdict } from './gate-filter';
import { shareOf } from './quota-share';
import { TokenBucket } from './token-bucket';

/** A tenant's limits: the configured defaults, each replaced by the tenant's own quota where it sets one. */
export type QuotaLimits = Omit<EventMeshConfig['security']['gate']['quota'], 'syncMs'>;

export type QuotaOverrideValues = { [K in keyof QuotaLimits]: number | null };

export function effectiveLimits(defaults: QuotaLimits, overrides?: QuotaOverrideValues): QuotaLimits {
  return {
    eventsPerSecond: overrides?.eventsPerSecond ?? defaults.eventsPerSecond,
    bytesPerSecond: overrides?.bytesPerSecond ?? defaults.bytesPerSecond,
    burstSeconds: overrides?.burstSeconds ?? defaults.burstSeconds,
    streamConnections: overrides?.streamConnections ?? defaults.streamConnections,
    subscriptions: overrides?.subscriptions ?? defaults.subscriptions,
  };
}

/** The tenants' own quotas (TenantQuotaStore). */
export interface TenantQuotaSource {
  version(): Promise<number>;
  snapshot(): Promise<{ version: number; quotas: { tenant: string; overrides: QuotaOverrideValues }[] }>;
  subscriptionCount(tenant: string): Promise<number>;
}

/** The instances' shared usage (QuotaUsageStore). */
export interface QuotaUsageExchange {
  exchange(
    instanceId: string,
    mine: readonly { tenant: string; eventsDemand: number; bytesDemand: number; streams: number }[],
    freshMs: number,
  ): Promise<{ tenant: string; instanceId: string; eventsDemand: number; bytesDemand: number; streams: number }[]>;
  forget(instanceId: string): Promise<void>;
  expire(olderThanMs: number): Promise<number>;
}

export interface TenantQuotaOptions {
  instanceId: string;
  defaults: QuotaLimits;
  syncMs: number;
  /** How often the tenants' own quotas are looked at for a change (EVENTMESH_SECURITY_GATE_ACL_REFRESH_MS). */
  refreshMs: number;
  /** Milliseconds now; injectable for tests of the arithmetic. */
  clock?: () => number;
}

/** The quota's reasons, audited and counted by the gate. */
export type QuotaReason = 'events_per_second' | 'bytes_per_second' | 'stream_connections' | 'subscriptions';
/** The reasons of a publish larger than the tenant's whole burst (413 BATCH_EXCEEDS_BURST). */
export type BurstReason = 'batch_exceeds_burst_events' | 'batch_exceeds_burst_bytes';

/** What this instance holds of one tenant. */
interface TenantState {
  limits: QuotaLimits;
  events: TokenBucket;
  bytes: TokenBucket;
  /** Asked for since the last sync (admitted or not): the demand this instance reports. */
  askedEvents: number;
  askedBytes: number;
  /** The demand it reported at the last sync, per second. */
  eventsDemand: number;
  bytesDemand: number;
  eventsShare: number;
  bytesShare: number;
  /** Stream connections held here, and held by the other instances at their last sync. */
  streams: number;
  peerStreams: number;
  lastUsed: number;
}

type Peer = { instanceId: string; eventsDemand: number; bytesDemand: number; streams: number };

/** The `quota_usage` row each instance writes at every sync whatever it serves: its presence (no tenant is empty). */
const PRESENCE = '';

/**
 * The TenantQuota link of the gate: per tenant, published events/s and bytes/s (token buckets, burst = rate x
 * burstSeconds), open stream connections, and subscriptions. The quota holds for the whole runtime, not per
 * instance, with no Postgres call on the publish path:
 *
 * - Rates. The runtime-wide bucket of a tenant is split among the instances that serve it. Each instance keeps
 *   a local bucket refilling at share x rate with capacity share x burst, and every `syncMs` it writes the
 *   demand it saw (events and bytes it was asked to admit per second, admitted or not) to `quota_usage` and reads
 *   the other instances' fresh rows, in one statement. Its share is its demand over everybody's (quota-share.ts):
 *   computed from the same reports, the shares sum to 1, so the local buckets add up to the tenant's one bucket.
 *   Error bound: a share moves only at a sync, and an instance reads another's report up to one period after
 *   it was written; so when demand shifts between instances (or a tenant starts on several at once: each starts
 *   with an even share among the live instances, then with no report of the others yet may take the whole rate
 *   until their reports arrive) the shares can sum to more than 1 for at most two sync periods. Over any window
 *   of T seconds a tenant is admitted at most rate x T + burst + instances x rate x 2 x syncMs events (the
 *   two-instance accuracy test measures it); in a steady state, rate x T + burst. Falling short is bounded the
 *   same way: an idle instance keeps a thousandth of the rate, and a dead one's share lasts until its rows are
 *   stale (5 sync periods, at least 1 s, by the database's clock: every instance's rows age on one clock).
 * - Stream connections: counted here while open (the admission's release gives one back) and summed with the
 *   other instances' counts from their last sync; concurrent opens on several instances within one sync period
 *   can pass together (bounded by instances x the opens of one period). A dead instance's count expires with its
 *   rows.
 * - Subscriptions: a count of the tenant's subscriptions (the `tenant` column of `subscriptions`), read when a
 *   request creates one: that request writes to Postgres anyway; concurrent creates can pass together.
 *
 * Over quota: 429 QUOTA_EXCEEDED with `Retry-After` (seconds until the bucket has room), and the `RateLimit-Policy`
 * and `RateLimit` fields of the IETF httpapi draft (draft-ietf-httpapi-ratelimit-headers), e.g.
 * `RateLimit-Policy: "events";q=200;w=1` and `RateLimit: "events";r=0;t=1`. A publish is charged per event (a
 * batch of n costs n); one larger than the tenant's whole burst is 413 BATCH_EXCEEDS_BURST with the largest publish
 * allowed, never a 429. The charge of an admitted publish the route then refuses (an invalid event, an unknown topic,
 * shed before anything was written) is given back (the admission's refund).
 */
export class TenantQuotaFilter implements GateFilter {
  readonly name = 'quota' as const;
  private readonly log = createLogger('TenantQuotaFilter');
  private readonly clock: () => number;
  private readonly tenants = new Map<string, TenantState>();
  private overrides = new Map<string, QuotaOverrideValues>();
  private overridesVersion = -1;
  private loading: Promise<void> | undefined;
  /** The other instances' fresh reports, by tenant, from the last sync. */
  private peers = new Map<string, Peer[]>();
  /** Instances with a fresh report (this one included), from the last sync. */
  private liveInstances = 1;
  private lastSync: number;
  private lastRefresh = 0;
  private lastExpire = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private syncFailures = 0;

  constructor(
    private readonly quotas: TenantQuotaSource,
    private readonly usage: QuotaUsageExchange,
    private readonly options: TenantQuotaOptions,
  ) {
    this.clock = options.clock ?? Date.now;
    this.lastSync = this.clock();
    this.schedule();
  }

  /** Reports older than this count for nothing: a dead instance's share and streams expire with them. */
  get freshMs(): number {
    return Math.max(1000, 5 * this.options.syncMs);
  }

  check(context: GateContext): Verdict | Promise<Verdict> {
    const { request } = context;
    if (!request.publish && !request.stream && !request.createsSubscription) return ALLOW;
    if (this.overridesVersion < 0) return this.loadOverrides().then(() => this.decide(context));
    return this.decide(context);
  }

  /** Syncs now (tests; the timer does it every syncMs). */
  async sync(): Promise<void> {
    const now = this.clock();
    if (now - this.lastRefresh >= this.options.refreshMs || this.overridesVersion < 0) {
      this.lastRefresh = now;
      if ((await this.quotas.version()) !== this.overridesVersion) await this.loadOverrides();
    }
    const seconds = Math.max(0.001, (now - this.lastSync) / 1000);
    this.lastSync = now;
    const mine: { tenant: string; eventsDemand: number; bytesDemand: number; streams: number }[] = [];
    for (const [tenant, state] of this.tenants) {
      // A tenant idle here for a while (no publish, no stream) is forgotten: its row stops being written and expires.
      if (
        state.streams === 0 &&
        state.askedEvents === 0 &&
        now - state.lastUsed > Math.max(30_000, 20 * this.options.syncMs)
      ) {
        this.tenants.delete(tenant);
        continue;
      }
      state.eventsDemand = state.askedEvents / seconds;
      state.bytesDemand = state.askedBytes / seconds;
      state.askedEvents = 0;
      state.askedBytes = 0;
      mine.push({ tenant, eventsDemand: state.eventsDemand, bytesDemand: state.bytesDemand, streams: state.streams });
    }
    // Every instance reports its presence, so the others know how many share a tenant it has not served yet.
    mine.push({ tenant: PRESENCE, eventsDemand: 0, bytesDemand: 0, streams: 0 });
    const reports = await this.usage.exchange(this.options.instanceId, mine, this.freshMs);
    this.liveInstances = 1 + new Set(reports.map((r) => r.instanceId)).size;
    const peers = new Map<string, Peer[]>();
    for (const r of reports) {
      if (r.tenant === PRESENCE) continue;
      let list = peers.get(r.tenant);
      if (!list) peers.set(r.tenant, (list = []));
      list.push(r);
    }
    this.peers = peers;
    const at = this.clock();
    for (const [tenant, state] of this.tenants) this.reshape(tenant, state, at);
    if (now - this.lastExpire > 60_000) {
      this.lastExpire = now;
      await this.usage.expire(Math.max(60_000, 10 * this.freshMs));
    }
  }

  stats(): { tenants: number; syncFailures: number; overridesVersion: number } {
    return { tenants: this.tenants.size, syncFailures: this.syncFailures, overridesVersion: this.overridesVersion };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    // This instance's demand and streams stop counting now rather than when its rows go stale.
    await this.usage
      .forget(this.options.instanceId)
      .catch((e: Error) => this.log.warn({ error: e.message }, "could not remove this instance's quota usage"));
  }

  private decide({ request, caller }: GateContext): Verdict | Promise<Verdict> {
    const tenant = caller.tenant;
    const now = this.clock();
    const state = this.stateOf(tenant, now);
    state.lastUsed = now;
    let refund: (() => void) | undefined;
    if (request.publish) {
      const { events, bytes } = request.publish;
      // A publish above the tenant's whole burst could never pass, however long it waited: refused as such (not a
      // 429 whose Retry-After would be a lie), and not counted as demand, since it asks for nothing it can get.
      const tooLarge = burstRefusal(state.limits, events, bytes);
      if (tooLarge) return tooLarge;
      state.askedEvents += events;
      state.askedBytes += bytes;
      // Both buckets must have room before either is charged.
      if (!state.events.has(events, now)) return this.rateRefusal('events_per_second', state, events, now);
      if (!state.bytes.has(bytes, now)) return this.rateRefusal('bytes_per_second', state, bytes, now);
      state.events.take(events, now);
      state.bytes.take(bytes, now);
      let refunded = false;
      refund = () => {
        if (refunded) return;
        refunded = true;
        const at = this.clock();
        state.events.give(events, at);
        state.bytes.give(bytes, at);
      };
    }
    if (request.createsSubscription) {
      return this.quotas.subscriptionCount(tenant).then((count) => {
        if (count < state.limits.subscriptions) return request.stream ? this.openStream(state) : ALLOW;
        return refusal(
          'subscriptions',
          `this tenant has its quota of ${state.limits.subscriptions} subscriptions; delete one to create another`,
          `"subscriptions";q=${state.limits.subscriptions}`,
          `"subscriptions";r=0`,
        );
      });
    }
    if (request.stream) return this.openStream(state);
    return refund ? { allow: true, refund } : ALLOW;
  }

  /** Holds one of the tenant's stream connections until the admission is released. */
  private openStream(state: TenantState): Verdict {
    if (state.streams + state.peerStreams >= state.limits.streamConnections) {
      return refusal(
        'stream_connections',
        `this tenant holds its quota of ${state.limits.streamConnections} open stream connections; close one to open another`,
        `"streams";q=${state.limits.streamConnections};qu="concurrent-requests"`,
        `"streams";r=0;t=1`,
        1,
      );
    }
    state.streams++;
    let released = false;
    return {
      allow: true,
      release: () => {
        if (released) return;
        released = true;
        state.streams--;
        state.lastUsed = this.clock();
      },
    };
  }

  private rateRefusal(
    reason: 'events_per_second' | 'bytes_per_second',
    state: TenantState,
    n: number,
    now: number,
  ): Verdict {
    const events = reason === 'events_per_second';
    const bucket = events ? state.events : state.bytes;
    const rate = events ? state.limits.eventsPerSecond : state.limits.bytesPerSecond;
    const wait = bucket.secondsUntil(n);
    const remaining = Math.max(0, Math.floor(bucket.level(now)));
    return refusal(
      reason,
      `this tenant publishes more than its quota of ${rate} ${events ? 'events' : 'bytes'} per second; retry after ${wait} s`,
      events ? `"events";q=${rate};w=1` : `"bytes";q=${rate};qu="content-bytes";w=1`,
      `"${events ? 'events' : 'bytes'}";r=${remaining};t=${wait}`,
      wait,
    );
  }

  /** The tenant's state here, created on its first request with this instance's share as the last sync saw it. */
  private stateOf(tenant: string, now: number): TenantState {
    let state = this.tenants.get(tenant);
    if (state) return state;
    const limits = effectiveLimits(this.options.defaults, this.overrides.get(tenant));
    const peers = this.peers.get(tenant) ?? [];
    // A tenant nobody reported yet: an even share among the live instances (several may start serving it at
    // once); else a newcomer's share beside those already serving it.
    const eventsShare =
      peers.length === 0
        ? 1 / this.liveInstances
        : shareOf(
            0,
            peers.map((p) => p.eventsDemand),
            limits.eventsPerSecond,
          );
    const bytesShare =
      peers.length === 0
        ? 1 / this.liveInstances
        : shareOf(
            0,
            peers.map((p) => p.bytesDemand),
            limits.bytesPerSecond,
          );
    state = {
      limits,
      events: new TokenBucket(
        eventsShare * limits.eventsPerSecond,
        eventsShare * limits.eventsPerSecond * limits.burstSeconds,
        now,
      ),
      bytes: new TokenBucket(
        bytesShare * limits.bytesPerSecond,
        bytesShare * limits.bytesPerSecond * limits.burstSeconds,
        now,
      ),
      askedEvents: 0,
      askedBytes: 0,
      eventsDemand: 0,
      bytesDemand: 0,
      eventsShare,
      bytesShare,
      streams: 0,
      peerStreams: peers.reduce((sum, p) => sum + p.streams, 0),
      lastUsed: now,
    };
    this.tenants.set(tenant, state);
    return state;
  }

  /** Sets a tenant's buckets to its share of its limits, from the last sync's reports and its current limits. */
  private reshape(tenant: string, state: TenantState, now: number): void {
    const peers = this.peers.get(tenant) ?? [];
    state.limits = effectiveLimits(this.options.defaults, this.overrides.get(tenant));
    state.eventsShare = shareOf(
      state.eventsDemand,
      peers.map((p) => p.eventsDemand),
      state.limits.eventsPerSecond,
    );
    state.bytesShare = shareOf(
      state.bytesDemand,
      peers.map((p) => p.bytesDemand),
      state.limits.bytesPerSecond,
    );
    state.peerStreams = peers.reduce((sum, p) => sum + p.streams, 0);
    const { eventsPerSecond, bytesPerSecond, burstSeconds } = state.limits;
    state.events.reshape(state.eventsShare * eventsPerSecond, state.eventsShare * eventsPerSecond * burstSeconds, now);
    state.bytes.reshape(state.bytesShare * bytesPerSecond, state.bytesShare * bytesPerSecond * burstSeconds, now);
  }

  /** Loads every tenant's own quota; concurrent callers share one load. */
  private loadOverrides(): Promise<void> {
    this.loading ??= (async () => {
      try {
        const snapshot = await this.quotas.snapshot();
        this.overrides = new Map(snapshot.quotas.map((q) => [q.tenant, q.overrides]));
        this.overridesVersion = snapshot.version;
        const now = this.clock();
        for (const [tenant, state] of this.tenants) this.reshape(tenant, state, now);
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.sync()
        .catch((e: Error) => {
          this.syncFailures++;
          this.log.warn({ error: e.message }, 'quota sync failed; the shares of the last sync stay in force');
        })
        .finally(() => this.schedule());
    }, this.options.syncMs);
    this.timer.unref();
  }
}

/**
 * The refusal of a publish larger than the tenant's runtime-wide burst (rate x burstSeconds), in events or in
 * bytes; undefined when it fits. The body names the largest publish the tenant may send (`maxBatchEvents`,
 * `maxBatchBytes`) so a client can split its batch without guessing. A batch within the burst but above this
 * instance's share of it is left to the bucket, which admits it when full and carries the debt.
 */
function burstRefusal(limits: QuotaLimits, events: number, bytes: number): Verdict | undefined {
  const maxBatchEvents = Math.floor(limits.eventsPerSecond * limits.burstSeconds);
  const maxBatchBytes = Math.floor(limits.bytesPerSecond * limits.burstSeconds);
  if (events <= maxBatchEvents && bytes <= maxBatchBytes) return undefined;
  const byEvents = events > maxBatchEvents;
  return {
    allow: false,
    refusal: new GateRefusal(
      ErrorCode.BatchExceedsBurst,
      byEvents
        ? `this publish holds ${events} events; this tenant's burst is ${maxBatchEvents} (${limits.eventsPerSecond} events/s x ${limits.burstSeconds} s), so it can never pass: send at most ${maxBatchEvents} events per publish`
        : `this publish is ${bytes} bytes; this tenant's burst is ${maxBatchBytes} bytes (${limits.bytesPerSecond} bytes/s x ${limits.burstSeconds} s), so it can never pass: send at most ${maxBatchBytes} bytes per publish`,
      byEvents ? 'batch_exceeds_burst_events' : 'batch_exceeds_burst_bytes',
      {},
      {
        quota: byEvents ? 'events_per_second' : 'bytes_per_second',
        maxBatchEvents,
        maxBatchBytes,
        ...(byEvents ? { events } : { bytes }),
      },
    ),
  };
}

function refusal(
  reason: QuotaReason,
  message: string,
  policy: string,
  limit: string,
  retryAfterSeconds?: number,
): Verdict {
  return {
    allow: false,
    refusal: new GateRefusal(
      ErrorCode.QuotaExceeded,
      message,
      reason,
      {
        ...(retryAfterSeconds !== undefined ? { 'retry-after': String(retryAfterSeconds) } : {}),
        'ratelimit-policy': policy,
        ratelimit: limit,
      },
      { quota: reason },
    ),
  };
}

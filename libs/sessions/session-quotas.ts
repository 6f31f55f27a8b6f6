import type { SessionsConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { PeerSessionUsage, SessionUsageRow } from '@libs/storage';

interface Usage {
  sessions: number;
  agents: number;
  bytes: number;
}

/** A tenant's usage as this process sees it: the total, its own, and each other process's as of its last renewal. */
export interface TenantSessionUsage extends Usage {
  tenant: string;
  here: Usage;
  others: { holder: string; instance: string; sessions: number; agents: number; bytes: number }[];
}

/**
 * A tenant's caps on streaming sessions across the runtime (EVENTMESH_SESSIONS_MAX_PER_TENANT,
 * _MAX_AGENTS_PER_TENANT, _MAX_BYTES_IN_FLIGHT_PER_TENANT): sessions open by its clients, agent replicas it serves,
 * and bytes in flight, charged as the windows of its open sessions (a session never has more on the way than its
 * window, so the charge is a bound, not an estimate). A charge is counted here and checked against what this process
 * holds plus what the other processes held at their last renewal (session-usage.ts). Each charge answers its
 * release, idempotent. Past a cap: 429 QUOTA_EXCEEDED, nothing opened.
 */
export class SessionQuotas {
  private readonly usage = new Map<string, Usage>();
  /** The other processes' usage by tenant, from the last exchange. */
  private peers = new Map<string, PeerSessionUsage[]>();
  private listener?: () => void;

  constructor(
    private readonly limits: Pick<SessionsConfig, 'maxPerTenant' | 'maxAgentsPerTenant' | 'maxBytesInFlightPerTenant'>,
  ) {}

  /** A session (or a Mode 2 publisher or subscription) with a window of `windowBytes`. */
  openSession(tenant: string, windowBytes: number): () => void {
    const u = this.of(tenant);
    const all = this.total(tenant);
    if (all.sessions >= this.limits.maxPerTenant)
      throw exceeded('sessions', `this tenant holds its quota of ${this.limits.maxPerTenant} sessions`);
    if (all.bytes + windowBytes > this.limits.maxBytesInFlightPerTenant)
      throw exceeded(
        'session_bytes_in_flight',
        `a window of ${windowBytes} bytes would pass this tenant's ${this.limits.maxBytesInFlightPerTenant} bytes in flight (${all.bytes} held by its sessions)`,
      );
    u.sessions++;
    u.bytes += windowBytes;
    this.listener?.();
    return this.once(tenant, (v) => {
      v.sessions--;
      v.bytes -= windowBytes;
    });
  }

  serveAgent(tenant: string): () => void {
    const u = this.of(tenant);
    if (this.total(tenant).agents >= this.limits.maxAgentsPerTenant)
      throw exceeded(
        'session_agents',
        `this tenant serves its quota of ${this.limits.maxAgentsPerTenant} agent replicas`,
      );
    u.agents++;
    this.listener?.();
    return this.once(tenant, (v) => v.agents--);
  }

  /** What a tenant holds in this process (sessions, agent replicas, bytes of windows). */
  of(tenant: string): Usage {
    let u = this.usage.get(tenant);
    if (!u) this.usage.set(tenant, (u = { sessions: 0, agents: 0, bytes: 0 }));
    return u;
  }

  /** Called after each charge and release (this process's rows are written at once). */
  onChange(listener: () => void): void {
    this.listener = listener;
  }

  /** This process's usage, a row per tenant holding anything. */
  local(): SessionUsageRow[] {
    return [...this.usage].map(([tenant, u]) => ({ tenant, ...u }));
  }

  /** The other processes' fresh usage, as the last exchange read it. */
  setPeers(rows: readonly PeerSessionUsage[]): void {
    const peers = new Map<string, PeerSessionUsage[]>();
    for (const row of rows) {
      let list = peers.get(row.tenant);
      if (!list) peers.set(row.tenant, (list = []));
      list.push(row);
    }
    this.peers = peers;
  }

  /** Every tenant's usage across the runtime as this process sees it (`tenant` for one), for operators. */
  view(tenant?: string): TenantSessionUsage[] {
    const tenants = new Set([...this.usage.keys(), ...this.peers.keys()]);
    return [...tenants]
      .filter((t) => tenant === undefined || t === tenant)
      .sort()
      .map((t) => ({
        tenant: t,
        ...this.total(t),
        here: { ...(this.usage.get(t) ?? { sessions: 0, agents: 0, bytes: 0 }) },
        others: (this.peers.get(t) ?? []).map((p) => ({
          holder: p.holder,
          instance: p.instanceId,
          sessions: p.sessions,
          agents: p.agents,
          bytes: p.bytes,
        })),
      }));
  }

  private total(tenant: string): Usage {
    const all = { ...(this.usage.get(tenant) ?? { sessions: 0, agents: 0, bytes: 0 }) };
    for (const p of this.peers.get(tenant) ?? []) {
      all.sessions += p.sessions;
      all.agents += p.agents;
      all.bytes += p.bytes;
    }
    return all;
  }

  private once(tenant: string, undo: (u: Usage) => void): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const u = this.of(tenant);
      undo(u);
      if (u.sessions === 0 && u.agents === 0 && u.bytes === 0) this.usage.delete(tenant);
      this.listener?.();
    };
  }
}

function exceeded(quota: string, message: string): EventMeshError {
  return new EventMeshError(ErrorCode.QuotaExceeded, `${message}; close one to open another`, { quota });
}

import type { SessionsConfig } from '../config';
import { ErrorCode, EventMeshError } from '../errors';

interface Usage {
  sessions: number;
  agents: number;
  bytes: number;
}

/**
 * A tenant's caps on streaming sessions in this gateway process (EVENTMESH_SESSIONS_MAX_PER_TENANT,
 * _MAX_AGENTS_PER_TENANT, _MAX_BYTES_IN_FLIGHT_PER_TENANT): sessions open by its clients, agent replicas it serves,
 * and bytes in flight, charged as the windows of its open sessions (a session never has more on the way than its
 * window, so the charge is a bound, not an estimate). Each charge answers its release, idempotent. Past a cap:
 * 429 QUOTA_EXCEEDED, nothing opened.
 */
export class SessionQuotas {
  private readonly usage = new Map<string, Usage>();

  constructor(
    private readonly limits: Pick<SessionsConfig, 'maxPerTenant' | 'maxAgentsPerTenant' | 'maxBytesInFlightPerTenant'>,
  ) {}

  /** A session (or a Mode 2 publisher or subscription) with a window of `windowBytes`. */
  openSession(tenant: string, windowBytes: number): () => void {
    const u = this.of(tenant);
    if (u.sessions >= this.limits.maxPerTenant)
      throw exceeded('sessions', `this tenant holds its quota of ${this.limits.maxPerTenant} sessions here`);
    if (u.bytes + windowBytes > this.limits.maxBytesInFlightPerTenant)
      throw exceeded(
        'session_bytes_in_flight',
        `a window of ${windowBytes} bytes would pass this tenant's ${this.limits.maxBytesInFlightPerTenant} bytes in flight here (${u.bytes} held by its sessions)`,
      );
    u.sessions++;
    u.bytes += windowBytes;
    return this.once(tenant, (v) => {
      v.sessions--;
      v.bytes -= windowBytes;
    });
  }

  serveAgent(tenant: string): () => void {
    const u = this.of(tenant);
    if (u.agents >= this.limits.maxAgentsPerTenant)
      throw exceeded(
        'session_agents',
        `this tenant serves its quota of ${this.limits.maxAgentsPerTenant} agent replicas here`,
      );
    u.agents++;
    return this.once(tenant, (v) => v.agents--);
  }

  /** What a tenant holds here (sessions, agent replicas, bytes of windows). */
  of(tenant: string): Usage {
    let u = this.usage.get(tenant);
    if (!u) this.usage.set(tenant, (u = { sessions: 0, agents: 0, bytes: 0 }));
    return u;
  }

  private once(tenant: string, undo: (u: Usage) => void): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const u = this.of(tenant);
      undo(u);
      if (u.sessions === 0 && u.agents === 0 && u.bytes === 0) this.usage.delete(tenant);
    };
  }
}

function exceeded(quota: string, message: string): EventMeshError {
  return new EventMeshError(ErrorCode.QuotaExceeded, `${message}; close one to open another`, { quota });
}

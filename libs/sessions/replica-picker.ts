import type { SessionAgentRow } from '@libs/storage';
import type { ReplicaReader } from './agent-presence';
import type { LocalReplicas, Replica } from './agent-replicas';
import type { SessionLinks } from './session-links';

/** How often an open that waits for a replica looks again (a replica connecting here wakes it at once). */
const LOOK_AGAIN_MS = 250;

/** A replica an open picked: one held here, or the presence row of one on another process. */
export type ReplicaPick = { replica: Replica; row?: undefined } | { replica?: undefined; row: SessionAgentRow };

/**
 * Which replica of an agent a session opens on: the least loaded of the tenant's replicas, here or on another process
 * (ties taken in turn). A replica here counts the sessions it holds; one elsewhere counts what its process last
 * published or what this process routed to it since, the larger: the opens of one burst see each other's share.
 */
export class ReplicaPicker {
  private cursor = 0;
  /** Live sessions this process routed to each remote replica (its share of their load, before their rows say). */
  private readonly routed = new Map<string, number>();

  constructor(
    private readonly replicas: LocalReplicas,
    private readonly reader: ReplicaReader,
    private readonly links: Pick<SessionLinks, 'available'>,
    /** This process's holder id (its own presence rows are its local replicas). */
    private readonly self: string,
  ) {}

  async pick(tenant: string, agent: string, excluded: ReadonlySet<string>): Promise<ReplicaPick | undefined> {
    const local = this.replicas
      .of(tenant, agent)
      .filter((r) => !excluded.has(r.id) && r.connection.open)
      .map((replica) => ({ pick: { replica } as ReplicaPick, load: replica.sessions.size }));
    const rows = await this.reader.replicasOf(tenant, agent);
    const remote = rows
      .filter((r) => r.holder !== this.self && !excluded.has(r.replicaId) && this.links.available(r.holder))
      .map((row) => ({
        pick: { row } as ReplicaPick,
        load: Math.max(row.sessions, this.routed.get(row.replicaId) ?? 0),
      }));
    const candidates = [...local, ...remote];
    if (candidates.length === 0) return undefined;
    const least = Math.min(...candidates.map((c) => c.load));
    const best = candidates.filter((c) => c.load === least);
    return best[this.cursor++ % best.length].pick;
  }

  /** Forgets what was read of an agent's replicas (one it named turned out to be gone). */
  forget(tenant: string, agent: string): void {
    this.reader.forget(tenant, agent);
  }

  /** Resolves when a replica connects here, after a moment, or at the deadline, whichever is first. */
  replicaChange(deadline: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        unlisten();
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, Math.min(LOOK_AGAIN_MS, deadline - Date.now())));
      const unlisten = this.replicas.onChange(done);
    });
  }

  /** A session routed to a remote replica (counted before its link is ready). */
  route(replicaId: string): void {
    this.routed.set(replicaId, (this.routed.get(replicaId) ?? 0) + 1);
  }

  /** A session routed to a remote replica ended, or never opened. */
  unroute(replicaId: string): void {
    const left = (this.routed.get(replicaId) ?? 1) - 1;
    if (left > 0) this.routed.set(replicaId, left);
    else this.routed.delete(replicaId);
  }
}

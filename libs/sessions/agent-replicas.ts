import { randomUUID } from 'node:crypto';
import type { AgentEnd } from './session-ends';
import type { SessionConnection } from './session-connection';

/** One replica of a session agent: a client connection serving an agent name of its tenant. */
export class Replica {
  readonly id: string = randomUUID();
  readonly since = new Date();
  /** The sessions bound to it, by session id (unique per replica: an id already here is refused). */
  readonly sessions = new Map<string, AgentEnd>();
  /** Bytes of chunks it sent, chunks, and credit stalls, over its life (for operators). */
  bytes = 0;
  chunks = 0;
  stalls = 0;

  constructor(
    readonly tenant: string,
    readonly agent: string,
    readonly connection: SessionConnection,
    /** Gives back its place in the tenant's agents quota (idempotent). */
    readonly release: () => void,
  ) {}
}

const keyOf = (tenant: string, agent: string) => `${tenant}\u0000${agent}`;

/**
 * The agent replicas connected to this gateway process, by tenant and name (a tenant's agents are its own: another
 * tenant's agent of the same name is another agent) and by id. Listeners hear of every serve and unserve: the
 * presence writer publishes them, and opens waiting for a replica look again.
 */
export class LocalReplicas {
  private readonly byName = new Map<string, Replica[]>();
  private readonly byId = new Map<string, Replica>();
  private readonly listeners = new Set<() => void>();

  add(replica: Replica): void {
    const key = keyOf(replica.tenant, replica.agent);
    this.byName.set(key, [...(this.byName.get(key) ?? []), replica]);
    this.byId.set(replica.id, replica);
    this.changed();
  }

  remove(replica: Replica): void {
    if (!this.byId.delete(replica.id)) return;
    const key = keyOf(replica.tenant, replica.agent);
    const left = (this.byName.get(key) ?? []).filter((r) => r !== replica);
    if (left.length > 0) this.byName.set(key, left);
    else this.byName.delete(key);
    this.changed();
  }

  of(tenant: string, agent: string): readonly Replica[] {
    return this.byName.get(keyOf(tenant, agent)) ?? [];
  }

  get(id: string): Replica | undefined {
    return this.byId.get(id);
  }

  all(): Replica[] {
    return [...this.byId.values()];
  }

  /** Replicas of a tenant here (its agents quota). */
  countOf(tenant: string): number {
    let n = 0;
    for (const r of this.byId.values()) if (r.tenant === tenant) n++;
    return n;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    for (const listener of [...this.listeners]) listener();
  }
}

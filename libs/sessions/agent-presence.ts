import { createLogger } from '../logging';
import type { HolderEpoch, SessionAgentRow, SessionAgentStore } from '../storage';
import type { LocalReplicas } from './agent-replicas';

/** How often a holder renews its replicas' rows. */
export const AGENT_PRESENCE_RENEW_MS = 1000;
/** A row not renewed within this is of a dead process: readers ignore it. */
export const AGENT_PRESENCE_FRESH_MS = 5000;
/** Rows older than this are deleted (by any holder). */
const AGENT_PRESENCE_EXPIRE_MS = 60_000;
/** How long a reader trusts what it read of an agent's replicas. */
const READ_MEMORY_MS = 500;
/** The most sessions of one replica its row lists for operators (the count is always whole). */
const LISTED_SESSIONS = 50;

export interface Holder {
  holder: string;
  instanceId: string;
  address: string;
}

/**
 * This gateway process's agent replicas, published in `session_agents` for the other instances, which open sessions
 * on them through the sessions link: at once on a serve or an unserve, and renewed every
 * {@link AGENT_PRESENCE_RENEW_MS} with their counts (sessions, bytes, stalls) while they stay. One write at a time;
 * a failed write is retried at the next renewal (an open that reads a stale row meanwhile reaches a replica that is
 * gone, is told so by its holder, and picks another). Fenced as StreamPresence is: once a newer process bears the
 * holder id, a renewal of this one is refused, overwrites nothing, and it stops writing.
 */
export class AgentPresence {
  private readonly log = createLogger('AgentPresence');
  private timer?: NodeJS.Timeout;
  private unlisten?: () => void;
  private published = new Set<string>();
  private writing?: Promise<void>;
  private again = false;
  private renewals = 0;
  /** The epoch this process claimed for its holder id, at its first write. */
  private claimed?: HolderEpoch;
  /** Set when a renewal was refused: another process bears the holder id now, and this one writes no more. */
  private fenced = false;

  constructor(
    private readonly store: SessionAgentStore,
    private readonly replicas: LocalReplicas,
    private readonly me: Holder,
  ) {}

  start(): void {
    this.unlisten = this.replicas.onChange(() => this.publish());
    this.timer = setInterval(() => this.publish(), AGENT_PRESENCE_RENEW_MS);
    this.timer.unref();
  }

  /** Stops renewing and deletes this holder's rows (a clean shutdown: no open is sent here any more). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.unlisten?.();
    await this.writing;
    if (!this.claimed) return;
    await this.store
      .remove(this.claimed)
      .catch((e: Error) => this.log.warn({ error: e.message }, 'cannot delete the session agent rows'));
  }

  private publish(): void {
    if (this.fenced) return;
    if (this.writing) {
      this.again = true;
      return;
    }
    this.writing = this.write()
      .catch((e: Error) => this.log.warn({ error: e.message }, 'cannot renew the session agent rows; retried'))
      .finally(() => {
        this.writing = undefined;
        if (this.again) {
          this.again = false;
          this.publish();
        }
      });
  }

  private async write(): Promise<void> {
    const replicas = this.replicas.all();
    const live = new Set(replicas.map((r) => r.id));
    const gone = [...this.published].filter((id) => !live.has(id));
    this.claimed ??= await this.store.claim(this.me.holder);
    await this.store.remove(this.claimed, gone);
    const renewed = await this.store.renew(
      this.claimed,
      this.me.instanceId,
      this.me.address,
      replicas.map((r) => ({
        replicaId: r.id,
        tenant: r.tenant,
        agent: r.agent,
        sessions: r.sessions.size,
        since: r.since.toISOString(),
        stats: {
          bytes: r.bytes,
          chunks: r.chunks,
          stalls: r.stalls,
          openSessions: [...r.sessions.values()].slice(0, LISTED_SESSIONS).map((s) => s.view()),
        },
      })),
    );
    if (!renewed) {
      this.fenced = true;
      clearInterval(this.timer);
      this.log.warn(
        { holder: this.me.holder, epoch: this.claimed.epoch },
        'another process bears this holder id now (a newer epoch); its session agent rows are no longer written here',
      );
      return;
    }
    this.published = live;
    if (++this.renewals % 30 === 0) await this.store.expire(AGENT_PRESENCE_EXPIRE_MS);
  }
}

/** The replicas of an agent on other processes, as an open reads them: fresh rows, remembered for a moment. */
export class ReplicaReader {
  private readonly memory = new Map<string, { at: number; rows: Promise<SessionAgentRow[]> }>();

  constructor(private readonly store: SessionAgentStore) {}

  replicasOf(tenant: string, agent: string): Promise<SessionAgentRow[]> {
    const key = `${tenant}\u0000${agent}`;
    const known = this.memory.get(key);
    if (known && Date.now() - known.at < READ_MEMORY_MS) return known.rows;
    // A failed read answers what was read before (or nothing): an open then fails or waits, it does not hang.
    const rows = this.store
      .replicasOf(tenant, agent, AGENT_PRESENCE_FRESH_MS)
      .catch(() => known?.rows ?? Promise.resolve([]));
    this.memory.set(key, { at: Date.now(), rows });
    if (this.memory.size > 10_000) this.memory.delete(this.memory.keys().next().value!);
    return rows;
  }

  /** Forgets what it read of an agent (a replica it named turned out to be gone). */
  forget(tenant: string, agent: string): void {
    this.memory.delete(`${tenant}\u0000${agent}`);
  }
}

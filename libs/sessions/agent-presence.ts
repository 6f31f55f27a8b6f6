import { createLogger } from '@libs/logging';
import { CoalescingRenewal, RecentReads } from '@libs/runtime';
import type { HolderEpoch, SessionAgentRow, SessionAgentStore } from '@libs/storage';
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
  private readonly renewal = new CoalescingRenewal('session agent rows', AGENT_PRESENCE_RENEW_MS, () => this.write());
  private unlisten?: () => void;
  private published = new Set<string>();
  private renewals = 0;
  /** The epoch this process claimed for its holder id, at its first write. */
  private claimed?: HolderEpoch;

  constructor(
    private readonly store: SessionAgentStore,
    private readonly replicas: LocalReplicas,
    private readonly me: Holder,
  ) {}

  start(): void {
    this.unlisten = this.replicas.onChange(() => this.renewal.renew());
    this.renewal.start();
  }

  /** Stops renewing and deletes this holder's rows (a clean shutdown: no open is sent here any more). */
  async close(): Promise<void> {
    this.unlisten?.();
    await this.renewal.close();
    if (!this.claimed) return;
    await this.store
      .remove(this.claimed)
      .catch((e: Error) => this.log.warn({ error: e.message }, 'cannot delete the session agent rows'));
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
      this.renewal.stop();
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
  private readonly reads: RecentReads<SessionAgentRow[]>;

  constructor(store: SessionAgentStore) {
    this.reads = new RecentReads(
      (key) => {
        const [tenant, agent] = key.split('\u0000');
        return store.replicasOf(tenant, agent, AGENT_PRESENCE_FRESH_MS);
      },
      READ_MEMORY_MS,
      [],
    );
  }

  replicasOf(tenant: string, agent: string): Promise<SessionAgentRow[]> {
    return this.reads.get(`${tenant}\u0000${agent}`);
  }

  /** Forgets what it read of an agent (a replica it named turned out to be gone). */
  forget(tenant: string, agent: string): void {
    this.reads.forget(`${tenant}\u0000${agent}`);
  }
}

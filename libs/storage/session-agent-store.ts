import type { DataSource } from 'typeorm';
import { claimHolderEpoch, holdsEpoch, type HolderEpoch } from './presence-holders';

/** Its key in `presence_holders`: the holder id, apart from the same process's stream presence. */
const fenceKey = (holder: string) => `session-agents:${holder}`;

/** One replica of a session agent as its holder publishes it. */
export interface SessionAgentRow {
  replicaId: string;
  tenant: string;
  agent: string;
  /** The holding process, `<instance id>/<pid>`. */
  holder: string;
  instanceId: string;
  /** Where the holder's internal sessions link listens. */
  address: string;
  sessions: number;
  stats: Record<string, unknown>;
  since: string;
}

type Raw = {
  replica_id: string;
  tenant: string;
  agent: string;
  holder: string;
  instance_id: string;
  address: string;
  sessions: number;
  stats: Record<string, unknown>;
  since: Date;
};

const rowOf = (r: Raw): SessionAgentRow => ({
  replicaId: r.replica_id,
  tenant: r.tenant,
  agent: r.agent,
  holder: r.holder,
  instanceId: r.instance_id,
  address: r.address,
  sessions: r.sessions,
  stats: r.stats,
  since: r.since.toISOString(),
});

const FRESH = `renewed_at > now() - make_interval(secs => $FRESH::float8 / 1000)`;

/**
 * The `session_agents` table (entities/session-agent.entity.ts): which gateway process holds which replica of which
 * tenant's session agent. Each holder rewrites its own rows (`renew`, one statement for all) and deletes a replica's
 * row when it stops serving (`remove`); a row older than the reader's `freshMs`, by the database's clock, is of a
 * process that died and counts for nothing; `expire` deletes such rows.
 */
export class SessionAgentStore {
  constructor(private readonly db: DataSource) {}

  /** Claims the next epoch of the holder id for its session agents' rows (as StreamPresenceStore.claim). */
  async claim(holder: string): Promise<HolderEpoch> {
    return { holder, epoch: await claimHolderEpoch(this.db, fenceKey(holder)) };
  }

  /**
   * Writes (or rewrites) this holder's replicas' rows while its epoch is the holder id's: false, nothing written,
   * once another process claimed the id (a stale holder after a takeover); true when there was nothing to write.
   */
  async renew(
    { holder, epoch }: HolderEpoch,
    instanceId: string,
    address: string,
    rows: readonly Pick<SessionAgentRow, 'replicaId' | 'tenant' | 'agent' | 'sessions' | 'stats' | 'since'>[],
  ): Promise<boolean> {
    if (rows.length === 0) return true;
    const written: unknown[] = await this.db.query(
      `INSERT INTO session_agents (replica_id, tenant, agent, holder, instance_id, address, sessions, stats, since, renewed_at)
       SELECT r.replica_id, r.tenant, r.agent, $1, $2, $3, r.sessions, r.stats, r.since, now()
         FROM unnest($4::text[], $5::text[], $6::text[], $7::int[], $8::jsonb[], $9::timestamptz[])
           AS r(replica_id, tenant, agent, sessions, stats, since)
        WHERE ${holdsEpoch('$10', '$11')}
       ON CONFLICT (replica_id) DO UPDATE SET sessions = EXCLUDED.sessions, stats = EXCLUDED.stats,
         address = EXCLUDED.address, renewed_at = now()
       RETURNING 1`,
      [
        holder,
        instanceId,
        address,
        rows.map((r) => r.replicaId),
        rows.map((r) => r.tenant),
        rows.map((r) => r.agent),
        rows.map((r) => r.sessions),
        rows.map((r) => JSON.stringify(r.stats)),
        rows.map((r) => r.since),
        fenceKey(holder),
        epoch,
      ],
    );
    return written.length > 0;
  }

  /** The fresh replicas of a tenant's agent. */
  async replicasOf(tenant: string, agent: string, freshMs: number): Promise<SessionAgentRow[]> {
    const rows: Raw[] = await this.db.query(
      `SELECT replica_id, tenant, agent, holder, instance_id, address, sessions, stats, since FROM session_agents
        WHERE tenant = $1 AND agent = $2 AND ${FRESH.replace('$FRESH', '$3')} ORDER BY since, replica_id`,
      [tenant, agent, freshMs],
    );
    return rows.map(rowOf);
  }

  /** The fresh replicas of every agent of a tenant (or of every tenant), for operators. */
  async list(tenant: string | undefined, freshMs: number): Promise<SessionAgentRow[]> {
    const rows: Raw[] = await this.db.query(
      `SELECT replica_id, tenant, agent, holder, instance_id, address, sessions, stats, since FROM session_agents
        WHERE ($1::text IS NULL OR tenant = $1) AND ${FRESH.replace('$FRESH', '$2')}
        ORDER BY tenant, agent, since, replica_id`,
      [tenant ?? null, freshMs],
    );
    return rows.map(rowOf);
  }

  /**
   * Deletes this holder's rows of `replicaIds` (they stopped serving), or all of its rows (a clean shutdown), while
   * its epoch is the holder id's: a stale holder deletes nothing of the process that took the id over.
   */
  async remove({ holder, epoch }: HolderEpoch, replicaIds?: readonly string[]): Promise<void> {
    if (replicaIds?.length === 0) return;
    await this.db.query(
      `DELETE FROM session_agents WHERE holder = $1 AND ($4::text[] IS NULL OR replica_id = ANY($4::text[]))
         AND ${holdsEpoch('$2', '$3')}`,
      [holder, fenceKey(holder), epoch, replicaIds ?? null],
    );
  }

  /** Deletes rows not renewed for `olderThanMs`; returns how many. */
  async expire(olderThanMs: number): Promise<number> {
    const [, deleted]: [unknown, number] = await this.db.query(
      `DELETE FROM session_agents WHERE renewed_at < now() - make_interval(secs => $1::float8 / 1000)`,
      [olderThanMs],
    );
    return deleted;
  }
}

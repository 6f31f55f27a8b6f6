import type { DataSource } from 'typeorm';

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

  async renew(
    holder: string,
    instanceId: string,
    address: string,
    rows: readonly Pick<SessionAgentRow, 'replicaId' | 'tenant' | 'agent' | 'sessions' | 'stats' | 'since'>[],
  ): Promise<void> {
    if (rows.length === 0) return;
    await this.db.query(
      `INSERT INTO session_agents (replica_id, tenant, agent, holder, instance_id, address, sessions, stats, since, renewed_at)
       SELECT r.replica_id, r.tenant, r.agent, $1, $2, $3, r.sessions, r.stats, r.since, now()
         FROM unnest($4::text[], $5::text[], $6::text[], $7::int[], $8::jsonb[], $9::timestamptz[])
           AS r(replica_id, tenant, agent, sessions, stats, since)
       ON CONFLICT (replica_id) DO UPDATE SET sessions = EXCLUDED.sessions, stats = EXCLUDED.stats,
         address = EXCLUDED.address, renewed_at = now()`,
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
      ],
    );
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

  /** Deletes this holder's rows of `replicaIds` (they stopped serving), or all of its rows (a clean shutdown). */
  async remove(holder: string, replicaIds?: readonly string[]): Promise<void> {
    if (replicaIds === undefined) await this.db.query(`DELETE FROM session_agents WHERE holder = $1`, [holder]);
    else if (replicaIds.length > 0)
      await this.db.query(`DELETE FROM session_agents WHERE holder = $1 AND replica_id = ANY($2::text[])`, [
        holder,
        replicaIds,
      ]);
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

import type { DataSource } from 'typeorm';

/** What one gateway process holds of one tenant's session quotas. */
export interface SessionUsageRow {
  tenant: string;
  sessions: number;
  agents: number;
  bytes: number;
}

export interface PeerSessionUsage extends SessionUsageRow {
  holder: string;
  instanceId: string;
}

/**
 * The `session_usage` table (entities/session-usage.entity.ts): one row per (tenant, gateway process), rewritten by
 * its process. `exchange` writes a process's rows, deletes those of tenants it no longer holds anything of, and reads
 * the other processes' fresh rows, in one statement; a row older than `freshMs` by the database's clock (the one
 * clock every instance shares here) is of a dead process and counts for nothing.
 */
export class SessionUsageStore {
  constructor(private readonly db: DataSource) {}

  async exchange(
    holder: string,
    instanceId: string,
    mine: readonly SessionUsageRow[],
    freshMs: number,
  ): Promise<PeerSessionUsage[]> {
    const rows: {
      tenant: string;
      holder: string;
      instance_id: string;
      sessions: number;
      agents: number;
      bytes: string;
    }[] = await this.db.query(
      `WITH gone AS (
         DELETE FROM session_usage WHERE holder = $1 AND NOT (tenant = ANY($3::text[]))
       ), written AS (
         INSERT INTO session_usage (tenant, holder, instance_id, sessions, agents, bytes, renewed_at)
         SELECT u.tenant, $1, $2, u.sessions, u.agents, u.bytes, now()
           FROM unnest($3::text[], $4::int[], $5::int[], $6::bigint[]) AS u(tenant, sessions, agents, bytes)
         ON CONFLICT (tenant, holder) DO UPDATE SET sessions = EXCLUDED.sessions, agents = EXCLUDED.agents,
           bytes = EXCLUDED.bytes, instance_id = EXCLUDED.instance_id, renewed_at = now()
       )
       SELECT tenant, holder, instance_id, sessions, agents, bytes FROM session_usage
        WHERE holder <> $1 AND renewed_at > now() - make_interval(secs => $7::float8 / 1000)`,
      [
        holder,
        instanceId,
        mine.map((u) => u.tenant),
        mine.map((u) => u.sessions),
        mine.map((u) => u.agents),
        mine.map((u) => u.bytes),
        freshMs,
      ],
    );
    return rows.map((r) => ({
      tenant: r.tenant,
      holder: r.holder,
      instanceId: r.instance_id,
      sessions: r.sessions,
      agents: r.agents,
      bytes: Number(r.bytes),
    }));
  }

  /** Deletes this process's rows (a clean shutdown: what it held stops counting now, not when its rows go stale). */
  async forget(holder: string): Promise<void> {
    await this.db.query(`DELETE FROM session_usage WHERE holder = $1`, [holder]);
  }

  /** Deletes rows not renewed for `olderThanMs`; returns how many. */
  async expire(olderThanMs: number): Promise<number> {
    const [, deleted]: [unknown, number] = await this.db.query(
      `DELETE FROM session_usage WHERE renewed_at < now() - make_interval(secs => $1::float8 / 1000)`,
      [olderThanMs],
    );
    return deleted;
  }
}

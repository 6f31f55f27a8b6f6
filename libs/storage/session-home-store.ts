import type { DataSource } from 'typeorm';

/** The home of a Mode 2 session: the gateway process that orders and fans out its publications. */
export interface SessionHomeRow {
  tenant: string;
  name: string;
  holder: string;
  instanceId: string;
  address: string;
  epoch: number;
}

type Raw = { tenant: string; name: string; holder: string; instance_id: string; address: string; epoch: number };

const rowOf = (r: Raw): SessionHomeRow => ({
  tenant: r.tenant,
  name: r.name,
  holder: r.holder,
  instanceId: r.instance_id,
  address: r.address,
  epoch: r.epoch,
});

/**
 * The `session_homes` table (entities/session-home.entity.ts). `claim` answers a session's home in one statement:
 * the fresh one, or this process when there is none or it is stale (renewed longer than `freshMs` ago, by the
 * database's clock), its epoch one higher than the last home's. A home renews its rows every second (`renew`) and
 * deletes one when its session ends (`release`).
 */
export class SessionHomeStore {
  constructor(private readonly db: DataSource) {}

  async claim(
    tenant: string,
    name: string,
    me: { holder: string; instanceId: string; address: string },
    freshMs: number,
  ): Promise<SessionHomeRow> {
    // A claim that met another's insert of the same session, not yet visible to its snapshot, reads no row: again.
    for (let attempt = 1; ; attempt++) {
      const row = await this.claimOnce(tenant, name, me, freshMs);
      if (row) return row;
      if (attempt === 3) throw new Error(`no home could be read or claimed for session ${tenant}/${name}`);
    }
  }

  private async claimOnce(
    tenant: string,
    name: string,
    me: { holder: string; instanceId: string; address: string },
    freshMs: number,
  ): Promise<SessionHomeRow | undefined> {
    const rows: Raw[] = await this.db.query(
      `WITH claimed AS (
         INSERT INTO session_homes (tenant, name, holder, instance_id, address, epoch, renewed_at)
         VALUES ($1, $2, $3, $4, $5, 1, now())
         ON CONFLICT (tenant, name) DO UPDATE SET holder = EXCLUDED.holder, instance_id = EXCLUDED.instance_id,
           address = EXCLUDED.address, epoch = session_homes.epoch + 1, renewed_at = now()
           WHERE session_homes.renewed_at <= now() - make_interval(secs => $6::float8 / 1000)
         RETURNING tenant, name, holder, instance_id, address, epoch)
       SELECT * FROM claimed
       UNION ALL
       SELECT tenant, name, holder, instance_id, address, epoch FROM session_homes
        WHERE tenant = $1 AND name = $2 AND NOT EXISTS (SELECT 1 FROM claimed)`,
      [tenant, name, me.holder, me.instanceId, me.address, freshMs],
    );
    return rows[0] && rowOf(rows[0]);
  }

  /** Renews this holder's homes; answers the keys (`tenant/name`) it still holds (a row another process took is not). */
  async renew(holder: string, homes: readonly { tenant: string; name: string }[]): Promise<Set<string>> {
    if (homes.length === 0) return new Set();
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    const [rows] = (await this.db.query(
      `UPDATE session_homes h SET renewed_at = now()
         FROM unnest($2::text[], $3::text[]) AS k(tenant, name)
        WHERE h.tenant = k.tenant AND h.name = k.name AND h.holder = $1
        RETURNING h.tenant, h.name`,
      [holder, homes.map((h) => h.tenant), homes.map((h) => h.name)],
    )) as [{ tenant: string; name: string }[], number];
    return new Set(rows.map((r) => `${r.tenant}/${r.name}`));
  }

  /** Deletes a home this holder holds (its session ended). */
  async release(holder: string, tenant: string, name: string): Promise<void> {
    await this.db.query(`DELETE FROM session_homes WHERE holder = $1 AND tenant = $2 AND name = $3`, [
      holder,
      tenant,
      name,
    ]);
  }

  /** Deletes every home of this holder (a clean shutdown). */
  async remove(holder: string): Promise<void> {
    await this.db.query(`DELETE FROM session_homes WHERE holder = $1`, [holder]);
  }

  async expire(olderThanMs: number): Promise<number> {
    const [, deleted]: [unknown, number] = await this.db.query(
      `DELETE FROM session_homes WHERE renewed_at < now() - make_interval(secs => $1::float8 / 1000)`,
      [olderThanMs],
    );
    return deleted;
  }
}

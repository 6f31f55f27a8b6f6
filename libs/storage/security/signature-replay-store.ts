import type { DataSource } from 'typeorm';

/** The `signature_replays` table: one row per principal and `webhook-id` used (libs/security/signature-verifier.ts). */
export class SignatureReplayStore {
  constructor(private readonly db: DataSource) {}

  /**
   * Records the id. An id already recorded is a replay (false) unless its row has expired and was not purged
   * yet: then it is the id's first use within the window, and the row is taken over. One statement, so two
   * instances claiming the same id at once cannot both win.
   */
  async claim(tenant: string, principal: string, webhookId: string, expiresAt: Date): Promise<boolean> {
    const rows: unknown[] = await this.db.query(
      `INSERT INTO signature_replays AS r (tenant, principal, webhook_id, seen_at, expires_at) VALUES ($1, $2, $3, now(), $4)
       ON CONFLICT (tenant, principal, webhook_id) DO UPDATE SET seen_at = now(), expires_at = EXCLUDED.expires_at
         WHERE r.expires_at < now()
       RETURNING 1`,
      [tenant, principal, webhookId, expiresAt],
    );
    return rows.length === 1;
  }

  /** Deletes up to `limit` expired ids; answers how many it deleted. */
  async purge(limit: number): Promise<number> {
    const [, affected]: [unknown, number] = await this.db.query(
      `DELETE FROM signature_replays WHERE ctid IN (SELECT ctid FROM signature_replays WHERE expires_at < now() LIMIT $1)`,
      [limit],
    );
    return affected;
  }
}

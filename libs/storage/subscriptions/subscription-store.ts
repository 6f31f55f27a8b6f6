import type { DataSource } from 'typeorm';

/**
 * The `subscriptions` table's reads and writes that are plain SQL (the entity's own reads go through
 * SubscriptionEntity): an operator's pause and resume, and the runtime topics subscribed to.
 */
export class SubscriptionStore {
  constructor(private readonly db: DataSource) {}

  /** Sets the tenant's subscription from status `from` to `to`; false when it is not the tenant's, or not in `from`. */
  async moveStatus(id: string, tenant: string, from: string, to: string): Promise<boolean> {
    const moved: unknown[] = await this.db.query(
      `UPDATE subscriptions SET status = $4, updated_at = now() WHERE id = $1 AND tenant = $2 AND status = $3 RETURNING 1`,
      [id, tenant, from, to],
    );
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    return Number(moved[1] ?? 0) > 0;
  }

  /** The status of the tenant's subscription; undefined when the tenant has none by that id. */
  async statusOf(id: string, tenant: string): Promise<string | undefined> {
    const rows: { status: string }[] = await this.db.query(
      `SELECT status FROM subscriptions WHERE id = $1 AND tenant = $2`,
      [id, tenant],
    );
    return rows[0]?.status;
  }

  /** Whether any subscription, of any status, reads the topic. */
  async anyOn(topic: string): Promise<boolean> {
    const [{ observed }]: { observed: boolean }[] = await this.db.query(
      'SELECT EXISTS (SELECT 1 FROM subscriptions WHERE topic = $1) AS observed',
      [topic],
    );
    return observed;
  }

  /** The topics an active subscription reads that look made at runtime (`a2a.%`, `tenant.%`), any tenant's. */
  async activeRuntimeTopicCandidates(): Promise<string[]> {
    const rows: { topic: string }[] = await this.db.query(
      `SELECT DISTINCT topic FROM subscriptions
        WHERE status = 'ACTIVE' AND (topic LIKE 'a2a.%' OR topic LIKE 'tenant.%') ORDER BY topic`,
    );
    return rows.map((r) => r.topic);
  }
}

import type { DataSource } from 'typeorm';

/** What one instance reports of one tenant at a quota sync. */
export interface QuotaUsage {
  tenant: string;
  /** Publish demand over the instance's last sync interval, per second: events and bytes it was asked to admit. */
  eventsDemand: number;
  bytesDemand: number;
  /** Stream connections the instance holds for the tenant now. */
  streams: number;
}

export interface PeerQuotaUsage extends QuotaUsage {
  instanceId: string;
}

/**
 * The `quota_usage` table: one row per (tenant, instance), rewritten by its instance at every quota sync. A row
 * older than `freshMs` (by the database's clock, the one clock every instance shares here) is of an instance that
 * died or went idle for that tenant, and counts for nothing; `expire()` deletes such rows.
 */
export class QuotaUsageStore {
  constructor(private readonly db: DataSource) {}

  /**
   * Writes this instance's rows and reads every other instance's fresh rows, in one statement (one round trip
   * per sync, whatever the number of tenants).
   */
  async exchange(instanceId: string, mine: readonly QuotaUsage[], freshMs: number): Promise<PeerQuotaUsage[]> {
    const rows: {
      tenant: string;
      instance_id: string;
      events_demand: number;
      bytes_demand: number;
      streams: number;
    }[] = await this.db.query(
      `WITH written AS (
         INSERT INTO quota_usage (tenant, instance_id, events_demand, bytes_demand, streams, updated_at)
         SELECT u.tenant, $1, u.events_demand, u.bytes_demand, u.streams, now()
           FROM unnest($2::text[], $3::float8[], $4::float8[], $5::int[]) AS u(tenant, events_demand, bytes_demand, streams)
         ON CONFLICT (tenant, instance_id) DO UPDATE SET events_demand = EXCLUDED.events_demand, bytes_demand = EXCLUDED.bytes_demand,
           streams = EXCLUDED.streams, updated_at = now()
         RETURNING 1
       )
       SELECT tenant, instance_id, events_demand, bytes_demand, streams FROM quota_usage
        WHERE instance_id <> $1 AND updated_at > now() - make_interval(secs => $6::float8 / 1000)`,
      [
        instanceId,
        mine.map((u) => u.tenant),
        mine.map((u) => u.eventsDemand),
        mine.map((u) => u.bytesDemand),
        mine.map((u) => u.streams),
        freshMs,
      ],
    );
    return rows.map((r) => ({
      tenant: r.tenant,
      instanceId: r.instance_id,
      eventsDemand: r.events_demand,
      bytesDemand: r.bytes_demand,
      streams: r.streams,
    }));
  }

  /** Deletes this instance's rows (a clean shutdown: its streams and demand stop counting now, not when they expire). */
  async forget(instanceId: string): Promise<void> {
    await this.db.query(`DELETE FROM quota_usage WHERE instance_id = $1`, [instanceId]);
  }

  /** Deletes rows not rewritten for `olderThanMs`; returns how many. */
  async expire(olderThanMs: number): Promise<number> {
    const [, deleted]: [unknown, number] = await this.db.query(
      `DELETE FROM quota_usage WHERE updated_at < now() - make_interval(secs => $1::float8 / 1000)`,
      [olderThanMs],
    );
    return deleted;
  }
}

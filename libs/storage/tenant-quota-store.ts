import type { DataSource } from 'typeorm';
import { policyVersion } from './gate-policy-versions';

/** The limits a tenant's own quota may set; each absent (null) one is the configured default. */
export interface QuotaOverrides {
  eventsPerSecond: number | null;
  bytesPerSecond: number | null;
  burstSeconds: number | null;
  streamConnections: number | null;
  subscriptions: number | null;
}

export interface StoredTenantQuota {
  tenant: string;
  overrides: QuotaOverrides;
  updatedAt: Date;
}

interface RawQuota {
  tenant: string;
  events_per_second: number | null;
  bytes_per_second: string | null;
  burst_seconds: number | null;
  stream_connections: number | null;
  subscriptions: number | null;
  updated_at: Date;
}

const COLUMNS =
  'tenant, events_per_second, bytes_per_second, burst_seconds, stream_connections, subscriptions, updated_at';

const quotaOf = (r: RawQuota): StoredTenantQuota => ({
  tenant: r.tenant,
  overrides: {
    eventsPerSecond: r.events_per_second,
    bytesPerSecond: r.bytes_per_second === null ? null : Number(r.bytes_per_second),
    burstSeconds: r.burst_seconds,
    streamConnections: r.stream_connections,
    subscriptions: r.subscriptions,
  },
  updatedAt: r.updated_at,
});

/**
 * The `tenant_quotas` table: each tenant's own limits, and its policy version, which every change bumps in its own
 * transaction (a trigger, see gate-policy-versions.ts) and every instance polls to reload them.
 */
export class TenantQuotaStore {
  constructor(private readonly db: DataSource) {}

  version(): Promise<number> {
    return policyVersion(this.db, 'tenant_quotas');
  }

  /** Every tenant's quota, with a version no newer than they are (read first: a change between is reloaded next poll). */
  async snapshot(): Promise<{ version: number; quotas: StoredTenantQuota[] }> {
    const version = await this.version();
    const rows: RawQuota[] = await this.db.query(`SELECT ${COLUMNS} FROM tenant_quotas`);
    return { version, quotas: rows.map(quotaOf) };
  }

  async get(tenant: string): Promise<StoredTenantQuota | undefined> {
    const rows: RawQuota[] = await this.db.query(`SELECT ${COLUMNS} FROM tenant_quotas WHERE tenant = $1`, [tenant]);
    return rows.length === 0 ? undefined : quotaOf(rows[0]);
  }

  /**
   * Sets the tenant's quota to `overrides` (each null limit back to the default), replacing what was set before;
   * the version moves with it.
   */
  async put(tenant: string, overrides: QuotaOverrides): Promise<StoredTenantQuota> {
    const [row]: RawQuota[] = await this.db.query(
      `INSERT INTO tenant_quotas (tenant, events_per_second, bytes_per_second, burst_seconds, stream_connections, subscriptions, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, now())
       ON CONFLICT (tenant) DO UPDATE SET events_per_second = EXCLUDED.events_per_second, bytes_per_second = EXCLUDED.bytes_per_second,
         burst_seconds = EXCLUDED.burst_seconds, stream_connections = EXCLUDED.stream_connections,
         subscriptions = EXCLUDED.subscriptions, updated_at = now()
       RETURNING ${COLUMNS}`,
      [
        tenant,
        overrides.eventsPerSecond,
        overrides.bytesPerSecond,
        overrides.burstSeconds,
        overrides.streamConnections,
        overrides.subscriptions,
      ],
    );
    return quotaOf(row);
  }

  /**
   * The tenant's subscriptions: the subscription quota's count. Reads `subscriptions.tenant` (the tenant column
   * of the multi-tenant schema).
   */
  async subscriptionCount(tenant: string): Promise<number> {
    const [row]: { n: number }[] = await this.db.query(
      `SELECT count(*)::int AS n FROM subscriptions WHERE tenant = $1`,
      [tenant],
    );
    return row.n;
  }
}

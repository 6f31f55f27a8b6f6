import { z } from 'zod';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { QuotaOverrides, TenantQuotaStore } from '@libs/storage';
import type { Caller } from './caller';
import { effectiveLimits, QuotaLimits } from './tenant-quota-filter';

/** A tenant's quota as the admin API shows it: the limits in force, and which of them the tenant's own quota sets. */
export interface TenantQuotaView {
  tenant: string;
  quota: QuotaLimits;
  overrides: QuotaOverrides;
}

const TENANT = /^[A-Za-z0-9._-]{1,64}$/;

const limit = (min: number, max: number) => z.number().int().min(min).max(max).nullable().default(null);

/** The same ranges as the configured defaults (libs/config, EVENTMESH_SECURITY_GATE_QUOTA_*); null or absent: the default. */
export const tenantQuotaOverridesSchema = z
  .object({
    eventsPerSecond: limit(1, 100_000_000),
    bytesPerSecond: limit(1024, 100 * 1024 * 1024 * 1024),
    burstSeconds: limit(1, 60),
    streamConnections: limit(1, 10_000_000),
    subscriptions: limit(1, 10_000_000),
  })
  .strict();

/**
 * The tenant quotas' admin API (`/admin/tenants/{tenant}/quota`). A tenant's admins read their own tenant's
 * quota; the operator tenant's admins (EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT) read and set any tenant's.
 * Another tenant's quota reads as nothing (404), so a tenant learns nothing of the others; a tenant's admin
 * setting its own quota is refused (403). A change applies on every instance within the refresh period.
 */
export class TenantQuotaAdmin {
  constructor(
    private readonly store: TenantQuotaStore,
    private readonly defaults: QuotaLimits,
    private readonly operatorTenant: string,
  ) {}

  async get(caller: Caller, tenant: string): Promise<TenantQuotaView> {
    this.assertVisible(caller, tenant);
    const stored = await this.store.get(tenant);
    return this.viewOf(tenant, stored?.overrides);
  }

  async put(caller: Caller, tenant: string, body: unknown): Promise<TenantQuotaView> {
    this.assertVisible(caller, tenant);
    if (caller.tenant !== this.operatorTenant) {
      throw new EventMeshError(ErrorCode.Forbidden, "only the operator tenant's admins may set a tenant's quota");
    }
    if (!TENANT.test(tenant))
      throw new EventMeshError(ErrorCode.InvalidRequest, 'tenant: 1 to 64 characters of [A-Za-z0-9._-]', {
        field: 'tenant',
      });
    const parsed = tenantQuotaOverridesSchema.safeParse(body ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue.path.join('.') || (issue.code === 'unrecognized_keys' ? issue.keys[0] : 'body');
      throw new EventMeshError(ErrorCode.InvalidRequest, `${field}: ${issue.message}`, { field });
    }
    const stored = await this.store.put(tenant, parsed.data);
    return this.viewOf(tenant, stored.overrides);
  }

  private assertVisible(caller: Caller, tenant: string): void {
    if (caller.tenant !== this.operatorTenant && caller.tenant !== tenant)
      throw new EventMeshError(ErrorCode.NotFound, `no tenant ${tenant}`);
  }

  private viewOf(tenant: string, overrides: QuotaOverrides | undefined): TenantQuotaView {
    const none: QuotaOverrides = {
      eventsPerSecond: null,
      bytesPerSecond: null,
      burstSeconds: null,
      streamConnections: null,
      subscriptions: null,
    };
    return { tenant, quota: effectiveLimits(this.defaults, overrides), overrides: overrides ?? none };
  }
}

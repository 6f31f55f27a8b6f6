import { Body, Controller, Get, Param, Put } from '@nestjs/common';
import { Caller, TenantQuotaAdmin, TenantQuotaView } from '@libs/security';
import { CallerParam, GateRoute } from '../http/gate-route';
import { tenantQuotaOverridesSchema } from '@libs/security';
import { z } from 'zod';
import { TENANT_NAME } from '@libs/config';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { requiredBody } from '../http/parse-body';
import { tenantQuotaViewSchema } from '../http/api-schemas';

/** A tenant's quota: its own admins read it, the operator tenant's admins set it (libs/security/tenant-quota-admin.ts). */
@Controller('admin/tenants')
@GateRoute({ action: 'admin', admin: true })
export class TenantQuotaController {
  constructor(private readonly quotas: TenantQuotaAdmin) {}

  @Get(':tenant/quota')
  @ApiRoute({
    summary: "A tenant's quota",
    tags: ['admin'],
    params: { tenant: 'the tenant' },
    responses: { 200: { description: 'the quota', schema: tenantQuotaViewSchema }, ...errors(404), ...GATED },
  })
  get(@CallerParam() caller: Caller, @Param('tenant') tenant: string): Promise<TenantQuotaView> {
    return this.quotas.get(caller, tenant);
  }

  @Put(':tenant/quota')
  @ApiRoute({
    summary: "Set a tenant's quota overrides (operator tenant's admins)",
    tags: ['admin'],
    params: { tenant: z.string().regex(TENANT_NAME).describe('the tenant') },
    body: { schema: tenantQuotaOverridesSchema },
    responses: { 200: { description: 'the quota', schema: tenantQuotaViewSchema }, ...errors(400, 404), ...GATED },
  })
  put(@CallerParam() caller: Caller, @Param('tenant') tenant: string, @Body() body: unknown): Promise<TenantQuotaView> {
    return this.quotas.put(caller, tenant, requiredBody(body));
  }
}

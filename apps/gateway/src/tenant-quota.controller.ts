import { Body, Controller, Get, Param, Put } from '@nestjs/common';
import { Caller, TenantQuotaAdmin, TenantQuotaView } from '../../../libs/security';
import { CallerParam, GateRoute } from './gate-route';

/** A tenant's quota: its own admins read it, the operator tenant's admins set it (libs/security/tenant-quota-admin.ts). */
@Controller('admin/tenants')
@GateRoute({ action: 'admin', admin: true })
export class TenantQuotaController {
  constructor(private readonly quotas: TenantQuotaAdmin) {}

  @Get(':tenant/quota')
  get(@CallerParam() caller: Caller, @Param('tenant') tenant: string): Promise<TenantQuotaView> {
    return this.quotas.get(caller, tenant);
  }

  @Put(':tenant/quota')
  put(@CallerParam() caller: Caller, @Param('tenant') tenant: string, @Body() body: unknown): Promise<TenantQuotaView> {
    return this.quotas.put(caller, tenant, body);
  }
}

import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiKeyResource, ApiKeyService, Caller, createApiKeySchema, CreatedApiKey } from '../../../libs/security';
import { parseBody } from './parse-body';
import { CallerParam, GateRoute } from './gate-route';

const tenantOf = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/**
 * API keys of services (docs/security.md): created with the secret shown once, listed (never a secret), revoked.
 * Each acts on the caller's tenant; an admin of the operator tenant may name another with `tenant`.
 */
@Controller('admin/api-keys')
@GateRoute({ action: 'admin', admin: true })
export class ApiKeysController {
  constructor(private readonly apiKeys: ApiKeyService) {}

  @Post()
  @HttpCode(201)
  create(@CallerParam() caller: Caller, @Body() body: unknown): Promise<CreatedApiKey> {
    return this.apiKeys.create(caller, parseBody(createApiKeySchema, body));
  }

  @Get()
  async list(@CallerParam() caller: Caller, @Query('tenant') tenant: unknown): Promise<{ apiKeys: ApiKeyResource[] }> {
    return { apiKeys: await this.apiKeys.list(caller, tenantOf(tenant)) };
  }

  @Delete(':id')
  @HttpCode(204)
  async revoke(@CallerParam() caller: Caller, @Param('id') id: string, @Query('tenant') tenant: unknown): Promise<void> {
    await this.apiKeys.revoke(caller, id, tenantOf(tenant));
  }
}

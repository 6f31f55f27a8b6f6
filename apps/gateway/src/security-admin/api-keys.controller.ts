import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiKeyResource, ApiKeyService, Caller, createApiKeySchema, CreatedApiKey } from '@libs/security';
import { TENANT_NAME } from '@libs/config';
import { parseBody, parseQuery } from '../http/parse-body';
import { CallerParam, GateRoute } from '../http/gate-route';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { apiKeySchema, createdApiKeySchema } from '../http/api-schemas';

const TENANT = z.object({
  tenant: z.string().regex(TENANT_NAME).optional().describe("another tenant (the operator tenant's admins only)"),
});

/**
 * API keys of services (docs/security.md): created with the secret shown once, listed (never a secret), revoked.
 * Each acts on the caller's tenant; an admin of the operator tenant may name another with `tenant`.
 */
@Controller('admin/api-keys')
@GateRoute({ action: 'admin', admin: true })
export class ApiKeysController {
  constructor(private readonly apiKeys: ApiKeyService) {}

  @Post()
  @ApiRoute({
    summary: 'Create an API key (its secret shown this once)',
    tags: ['admin'],
    body: { schema: createApiKeySchema },
    responses: { 201: { description: 'the key', schema: createdApiKeySchema }, ...errors(400), ...GATED },
  })
  @HttpCode(201)
  create(@CallerParam() caller: Caller, @Body() body: unknown): Promise<CreatedApiKey> {
    return this.apiKeys.create(caller, parseBody(createApiKeySchema, body));
  }

  @Get()
  @ApiRoute({
    summary: 'API keys of a tenant (never a secret)',
    tags: ['admin'],
    query: TENANT,
    responses: {
      200: { description: 'the keys', schema: z.object({ apiKeys: z.array(apiKeySchema) }) },
      ...errors(400),
      ...GATED,
    },
  })
  async list(@CallerParam() caller: Caller, @Query() query: unknown): Promise<{ apiKeys: ApiKeyResource[] }> {
    return { apiKeys: await this.apiKeys.list(caller, parseQuery(TENANT, query).tenant) };
  }

  @Delete(':id')
  @ApiRoute({
    summary: 'Revoke an API key',
    tags: ['admin'],
    params: { id: 'the key id' },
    query: TENANT,
    responses: { 204: { description: 'revoked' }, ...errors(400, 404), ...GATED },
  })
  @HttpCode(204)
  async revoke(@CallerParam() caller: Caller, @Param('id') id: string, @Query() query: unknown): Promise<void> {
    await this.apiKeys.revoke(caller, id, parseQuery(TENANT, query).tenant);
  }
}

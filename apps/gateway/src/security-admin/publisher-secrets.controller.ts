import { Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { Caller, publisherPrincipalSchema, PublisherSecretStore, PublisherSecretView } from '@libs/security';
import { CallerParam, GateRoute } from '../http/gate-route';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { publisherSecretViewSchema } from '../http/api-schemas';

const PRINCIPAL = { principal: publisherPrincipalSchema };

/**
 * Publisher signing secrets (docs/security.md, SignatureVerifier): `POST` creates one and shows it once
 * (`whsec_...`), `GET` lists ids and creation times, `DELETE` removes one. A principal has at most two (rotation).
 * Scoped to the caller's tenant: another tenant's secrets are not there. A change reaches every instance's
 * verifier within seconds (its cache).
 */
@Controller('admin/publishers/:principal/secrets')
@GateRoute({ action: 'admin', admin: true })
export class PublisherSecretsController {
  constructor(private readonly secrets: PublisherSecretStore) {}

  @Post()
  @ApiRoute({
    summary: 'Create a publisher signing secret (shown this once)',
    tags: ['admin'],
    params: PRINCIPAL,
    responses: {
      201: { description: 'the secret', schema: publisherSecretViewSchema.extend({ secret: z.string() }) },
      ...errors(400, 409),
      ...GATED,
    },
  })
  @HttpCode(201)
  create(
    @CallerParam() caller: Caller,
    @Param('principal') principal: string,
  ): Promise<PublisherSecretView & { secret: string }> {
    return this.secrets.create(caller.tenant, principal);
  }

  @Get()
  @ApiRoute({
    summary: "A publisher's signing secrets (ids only)",
    tags: ['admin'],
    params: PRINCIPAL,
    responses: {
      200: { description: 'the secrets', schema: z.array(publisherSecretViewSchema) },
      ...errors(400),
      ...GATED,
    },
  })
  list(@CallerParam() caller: Caller, @Param('principal') principal: string): Promise<PublisherSecretView[]> {
    return this.secrets.list(caller.tenant, principal);
  }

  @Delete(':id')
  @ApiRoute({
    summary: 'Delete a publisher signing secret',
    tags: ['admin'],
    params: { ...PRINCIPAL, id: 'the secret id' },
    responses: { 204: { description: 'deleted' }, ...errors(400, 404), ...GATED },
  })
  @HttpCode(204)
  async delete(
    @CallerParam() caller: Caller,
    @Param('principal') principal: string,
    @Param('id') id: string,
  ): Promise<void> {
    await this.secrets.delete(caller.tenant, principal, id);
  }
}

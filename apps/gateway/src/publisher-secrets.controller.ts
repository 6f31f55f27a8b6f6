import { Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { Caller, PublisherSecretStore, PublisherSecretView } from '../../../libs/security';
import { CallerParam, GateRoute } from './gate-route';

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
  @HttpCode(201)
  create(@CallerParam() caller: Caller, @Param('principal') principal: string): Promise<PublisherSecretView & { secret: string }> {
    return this.secrets.create(caller.tenant, principal);
  }

  @Get()
  list(@CallerParam() caller: Caller, @Param('principal') principal: string): Promise<PublisherSecretView[]> {
    return this.secrets.list(caller.tenant, principal);
  }

  @Delete(':id')
  @HttpCode(204)
  async delete(@CallerParam() caller: Caller, @Param('principal') principal: string, @Param('id') id: string): Promise<void> {
    await this.secrets.delete(caller.tenant, principal, id);
  }
}

import { DynamicModule, Module } from '@nestjs/common';
import { TenantQuotaAdmin } from '@libs/security';
import type { GatewayServices } from '../gateway-services';
import { LimitsController, RUNTIME_LIMITS } from './limits.controller';
import { provide } from '../http/provide';

/**
 * Publishing: `POST /events/publish`, served ahead of Nest (publish-route.ts: it is the hot path), and `GET /limits`,
 * the bounds a publisher batches to.
 */
@Module({})
export class PublishModule {
  static register(s: GatewayServices): DynamicModule {
    return {
      module: PublishModule,
      controllers: [LimitsController],
      providers: [provide(RUNTIME_LIMITS, s.limits), provide(TenantQuotaAdmin, s.quotas)],
    };
  }
}

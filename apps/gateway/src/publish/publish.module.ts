import { DynamicModule, Module } from '@nestjs/common';
import { AdaptorRegistry } from '@libs/frame';
import { RequestReplyService } from '@libs/request-reply';
import { TenantQuotaAdmin } from '@libs/security';
import { SubscriptionService } from '@libs/subscriptions';
import type { GatewayServices } from '../gateway-services';
import { EventsController } from './events.controller';
import { LimitsController, RUNTIME_LIMITS } from './limits.controller';
import { provide } from '../http/provide';

/**
 * Publishing and request-reply: `/events/*` (`POST /events/publish` itself is served ahead of Nest:
 * publish-route.ts) and `GET /limits`, the bounds a publisher batches to.
 */
@Module({})
export class PublishModule {
  static register(s: GatewayServices): DynamicModule {
    return {
      module: PublishModule,
      controllers: [EventsController, LimitsController],
      providers: [
        provide(SubscriptionService, s.subscriptions),
        provide(RequestReplyService, s.requestReply),
        provide(RUNTIME_LIMITS, s.limits),
        provide(TenantQuotaAdmin, s.quotas),
        provide(AdaptorRegistry, s.adaptors),
      ],
    };
  }
}

import { DynamicModule, Module } from '@nestjs/common';
import { DeadLetterReplays, DeadLetterService } from '@libs/dead-letters';
import { SkippedRangeStore } from '@libs/storage';
import { StreamClients } from '@libs/streams';
import { SubscriptionDeliveryState, SubscriptionOffsets, SubscriptionService } from '@libs/subscriptions';
import type { GatewayServices } from '../gateway-services';
import { DeadLettersController } from './dead-letters.controller';
import { SkippedRangesController } from './skipped-ranges.controller';
import { SubscriptionAliasesController } from './subscription-aliases.controller';
import { SubscriptionOperationsController } from './subscription-operations.controller';
import { SubscriptionsController } from './subscriptions.controller';
import { provide } from '../http/provide';

/**
 * Subscriptions and what operators do with them: CRUD (and its aliases `/events/subscribe`, `/events/unsubscribe`), offsets (view, seek), pause and resume, dead letters and
 * their replays, the events a subscription never got.
 */
@Module({})
export class SubscriptionsModule {
  static register(s: GatewayServices): DynamicModule {
    return {
      module: SubscriptionsModule,
      controllers: [
        SubscriptionsController,
        SubscriptionOperationsController,
        DeadLettersController,
        SkippedRangesController,
        SubscriptionAliasesController,
      ],
      providers: [
        provide(SubscriptionService, s.subscriptions),
        provide(SubscriptionOffsets, s.subscriptionOffsets),
        provide(SubscriptionDeliveryState, s.deliveryState),
        provide(StreamClients, s.streamClients),
        provide(DeadLetterService, s.deadLetters),
        provide(DeadLetterReplays, s.replays),
        provide(SkippedRangeStore, s.skippedRanges),
      ],
    };
  }
}

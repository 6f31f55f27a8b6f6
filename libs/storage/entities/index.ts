import { A2ATaskEntity } from './a2a-task.entity';
import { DeadLetterEntity } from './dead-letter.entity';
import { DeliveryRetryEntity } from './delivery-retry.entity';
import { PartitionLeaseEntity } from './partition-lease.entity';
import { SubscriptionOffsetEntity } from './subscription-offset.entity';
import { SubscriptionEntity } from './subscription.entity';

export { A2ATaskEntity, DeadLetterEntity, DeliveryRetryEntity, PartitionLeaseEntity, SubscriptionEntity, SubscriptionOffsetEntity };

export const ENTITIES = [
  SubscriptionEntity,
  SubscriptionOffsetEntity,
  PartitionLeaseEntity,
  DeadLetterEntity,
  DeliveryRetryEntity,
  A2ATaskEntity,
];

import { A2ATaskEntity } from './a2a-task.entity';
import { ApiKeyEntity } from './api-key.entity';
import { DeadLetterEntity } from './dead-letter.entity';
import { DeliveryRetryEntity } from './delivery-retry.entity';
import { DispatchRunEntity } from './dispatch-run.entity';
import { PartitionLeaseEntity } from './partition-lease.entity';
import { PendingRequestEntity } from './pending-request.entity';
import { PublisherSecretEntity } from './publisher-secret.entity';
import { SignatureReplayEntity } from './signature-replay.entity';
import { SkippedRangeEntity } from './skipped-range.entity';
import { SubscriptionOffsetEntity } from './subscription-offset.entity';
import { SubscriptionEntity } from './subscription.entity';

export {
  A2ATaskEntity,
  ApiKeyEntity,
  DeadLetterEntity,
  DeliveryRetryEntity,
  DispatchRunEntity,
  PartitionLeaseEntity,
  PendingRequestEntity,
  PublisherSecretEntity,
  SignatureReplayEntity,
  SkippedRangeEntity,
  SubscriptionEntity,
  SubscriptionOffsetEntity,
};

export const ENTITIES = [
  SubscriptionEntity,
  SubscriptionOffsetEntity,
  PartitionLeaseEntity,
  DispatchRunEntity,
  DeadLetterEntity,
  DeliveryRetryEntity,
  SkippedRangeEntity,
  PendingRequestEntity,
  A2ATaskEntity,
  ApiKeyEntity,
  PublisherSecretEntity,
  SignatureReplayEntity,
];

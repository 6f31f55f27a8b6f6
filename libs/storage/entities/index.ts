import { A2AAgentEntity } from './a2a-agent.entity';
import { A2APushConfigEntity } from './a2a-push-config.entity';
import { A2APushDeadLetterEntity } from './a2a-push-dead-letter.entity';
import { A2ATaskEntity } from './a2a-task.entity';
import { A2ATaskEventEntity } from './a2a-task-event.entity';
import { ApiKeyEntity } from './api-key.entity';
import { AclRuleEntity } from './acl-rule.entity';
import { DeadLetterEntity } from './dead-letter.entity';
import { DeliveryRetryEntity } from './delivery-retry.entity';
import { DispatchRunEntity } from './dispatch-run.entity';
import { EventPosition, EventPositionKey, LogPartitionKey } from './event-position';
import { PresenceHolderEntity } from './presence-holder.entity';
import { GatePolicyVersionEntity } from './gate-policy-version.entity';
import { PartitionLeaseEntity } from './partition-lease.entity';
import { PendingRequestEntity } from './pending-request.entity';
import { PublisherSecretEntity } from './publisher-secret.entity';
import { SessionAgentEntity } from './session-agent.entity';
import { SessionHomeEntity } from './session-home.entity';
import { SessionUsageEntity } from './session-usage.entity';
import { SignatureReplayEntity } from './signature-replay.entity';
import { QuotaUsageEntity } from './quota-usage.entity';
import { SkippedRangeEntity } from './skipped-range.entity';
import { StreamPresenceEntity } from './stream-presence.entity';
import { SubscriptionOffsetEntity } from './subscription-offset.entity';
import { SubscriptionEntity } from './subscription.entity';
import { TenantQuotaEntity } from './tenant-quota.entity';
import { TenantTopicEntity } from './tenant-topic.entity';
import { TopicGrantEntity } from './topic-grant.entity';

export {
  A2AAgentEntity,
  A2APushConfigEntity,
  A2APushDeadLetterEntity,
  A2ATaskEntity,
  A2ATaskEventEntity,
  AclRuleEntity,
  ApiKeyEntity,
  DeadLetterEntity,
  DeliveryRetryEntity,
  DispatchRunEntity,
  EventPosition,
  EventPositionKey,
  GatePolicyVersionEntity,
  LogPartitionKey,
  PartitionLeaseEntity,
  PendingRequestEntity,
  PresenceHolderEntity,
  PublisherSecretEntity,
  QuotaUsageEntity,
  SessionAgentEntity,
  SessionHomeEntity,
  SessionUsageEntity,
  SignatureReplayEntity,
  SkippedRangeEntity,
  StreamPresenceEntity,
  SubscriptionEntity,
  SubscriptionOffsetEntity,
  TenantQuotaEntity,
  TenantTopicEntity,
  TopicGrantEntity,
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
  A2ATaskEventEntity,
  A2AAgentEntity,
  ApiKeyEntity,
  PublisherSecretEntity,
  SignatureReplayEntity,
  AclRuleEntity,
  GatePolicyVersionEntity,
  TenantQuotaEntity,
  QuotaUsageEntity,
  StreamPresenceEntity,
  PresenceHolderEntity,
  SessionAgentEntity,
  SessionHomeEntity,
  SessionUsageEntity,
  A2APushConfigEntity,
  A2APushDeadLetterEntity,
  TenantTopicEntity,
  TopicGrantEntity,
];

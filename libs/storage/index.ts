export { createDataSource, createDispatchDataSource, poolLeakDetectorOf } from './data-source';
export {
  POSTGRES_DEADLINE_GRACE_MS,
  POSTGRES_IDLE_PROBE_AFTER_MS,
  POSTGRES_PROBE_TIMEOUT_MS,
  QueryDeadlineError,
  createPostgresClient,
} from './postgres-connection';
export {
  A2AAgentEntity,
  A2ATaskEntity,
  DeadLetterEntity,
  DeliveryRetryEntity,
  SubscriptionEntity,
  TenantTopicEntity,
  TopicGrantEntity,
} from './entities';
export { OffsetStore } from './offset-store';
export type { OffsetCommitResult, OffsetPosition } from './offset-store';
export { DEAD_LETTER_PURGE_BATCH, DeadLetterStore } from './dead-letter-store';
export type {
  DeadLetter,
  DeadLetterPosition,
  DeadLetterRow,
  DeadLetterWriteResult,
  LaneStart,
} from './dead-letter-store';
export { RetentionPurge } from './retention-purge';
export { DEAD_LETTER_STATES } from './dead-letter-filter';
export type { DeadLetterFilter } from './dead-letter-filter';
export { DeadLetterReplayStore } from './dead-letter-replay-store';
export type { ClaimedBatch, ClaimedLetter, ReplayScope, ReplaySelection } from './dead-letter-replay-store';
export { RetryStore } from './retry-store';
export type { ParkResult, ParkedDelivery } from './retry-store';
export { SkippedRangeStore } from './skipped-range-store';
export type { SkipRecordResult, SkippedRange } from './skipped-range-store';
export { LeaseStore } from './lease-store';
export { DispatchRunStore } from './dispatch-run-store';
export { PlacementStore } from './placement-store';
export type { OrphanRow, PlacementMove, TakeoverResult } from './placement-store';
export { isPostgresUnavailable } from './postgres-unavailable';
export { API_KEY_LAST_USED_RESOLUTION_SECONDS, ApiKeyStore } from './api-key-store';
export type { ApiKeyUse, ApiKeyView, StoredApiKey } from './api-key-store';
export { AclRuleStore } from './acl-rule-store';
export type { AclRuleRow } from './acl-rule-store';
export { TenantQuotaStore } from './tenant-quota-store';
export type { QuotaOverrides } from './tenant-quota-store';
export { TenantTopicStore, TopicGrantStore } from './tenant-topic-store';
export { QuotaUsageStore } from './quota-usage-store';
export { StreamPresenceStore } from './stream-presence-store';
export type { PresenceRow } from './stream-presence-store';
export type { HolderEpoch } from './presence-holders';
export { StoredCountsReader } from './stored-counts';
export type { StoredCounts } from './stored-counts';
export { SessionAgentStore } from './session-agent-store';
export type { SessionAgentRow } from './session-agent-store';
export { SessionUsageStore } from './session-usage-store';
export type { PeerSessionUsage, SessionUsageRow } from './session-usage-store';
export { SessionHomeStore } from './session-home-store';
export type { SessionHomeRow } from './session-home-store';
export { setTransactionLockTimeout } from './transaction-settings';
export { SubscriptionStore } from './subscriptions/subscription-store';
export { A2AAgentRows, AGENT_STYLES } from './a2a/agent-store';
export type { AgentFilter, AgentStyle, StoredAgentRow } from './a2a/agent-store';
export { SignatureReplayStore } from './security/signature-replay-store';
export { SEALED_SECRET_TABLES } from './security/sealed-secret-tables';
export { PublisherSecretRows } from './security/publisher-secret-rows';
export { PushConfigRows } from './a2a/push-config-rows';
export type { PushAuthentication, PushConfigRow, PushWireVersion } from './a2a/push-config-rows';
export { A2ATaskRows, readTaskEvents } from './a2a/task-rows';
export type { NewTaskRow, StoredTaskRow, TaskRowChange } from './a2a/task-rows';
export { TaskPublicationRows } from './a2a/task-publication-rows';
export {
  PUSH_LETTER_ID,
  PUSH_LETTER_RESOLUTIONS,
  PushDeadLetterStore,
  isPushLetterId,
} from './a2a/push-dead-letter-store';
export type {
  GivenUpPush,
  PushDeadLetter,
  PushDeadLetterFilter,
  PushLetterResolution,
} from './a2a/push-dead-letter-store';
export { PendingRequestStore } from './request-reply/pending-request-store';

export { createKafka } from './kafka-client';
export { TopicAdmin } from './topic-admin';
export { EventProducer } from './event-producer';
export type { ProducerDepth, ProducerOptions, PublishReceipt } from './event-producer';
export { PartitionReader } from './partition-reader';
export type { FetchedPartition, FetchedRecord, PartitionPosition } from './partition-reader';
export { isKafkaUnavailable } from './kafka-unavailable';
export { createTopicsAndWait } from './topic-creation';
export {
  TENANT_TOPIC_NAME,
  agentOfTopic,
  clientTopicNameOf,
  isAgentTopic,
  isAgentTopicOf,
  isTenantTopic,
  tenantTopicOf,
} from './runtime-topics';

import { tenantKafkaPartOf as tenantPartOf } from '@libs/config';

export { isAgentTopic, isAgentTopicOf } from '@libs/kafka';

/**
 * The Kafka topic an agent's tasks travel on: `a2a.<tenant>.<agent>.requests`, created when the agent is
 * registered. Agents are tenant-scoped, so the tenant is in the name (libs/config/tenant-kafka-part.ts); the tenant
 * part has no dots, so the name reads back unambiguously whatever dots the agent's name has.
 */
export function requestTopicOf(tenant: string, agent: string): string {
  return `a2a.${tenantPartOf(tenant)}.${agent}.requests`;
}

/**
 * The Kafka topic an agent's task events travel on, for observers: `a2a.<tenant>.<agent>.events` (the tenant part
 * as in {@link requestTopicOf}), created with the request topic. Each event of each task's log is one frame there
 * (libs/a2a/tasks/task-event-publisher.ts).
 */
export function eventsTopicOf(tenant: string, agent: string): string {
  return `a2a.${tenantPartOf(tenant)}.${agent}.events`;
}

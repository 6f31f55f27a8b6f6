import { tenantKafkaPartOf } from '@libs/config';

/**
 * The names of the Kafka topics the runtime makes while it runs (the configured ones are made at boot): each
 * tenant's own topics (`POST /topics`) and the A2A agents' topics (libs/a2a/relay/request-topic.ts makes their names).
 */

/**
 * What a tenant may call one of its own topics: the short name its clients use. No dots: the Kafka name below
 * reads back unambiguously, and Kafka counts `.` and `_` as one character when it looks for colliding names.
 */
export const TENANT_TOPIC_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

const TENANT_TOPIC = /^tenant\.[A-Za-z0-9_-]{1,64}\.[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/**
 * The Kafka topic of a tenant's own topic `name`: `tenant.<tenant>.<name>` (the tenant part as the A2A agents'
 * topics have it, libs/config/tenant-kafka-part.ts), so tenant A's `orders` and tenant B's `orders` are two topics.
 */
export function tenantTopicOf(tenant: string, name: string): string {
  return `tenant.${tenantKafkaPartOf(tenant)}.${name}`;
}

/** Whether a Kafka topic has the form of a tenant's own topic (served once the tenant created it). */
export function isTenantTopic(topic: string): boolean {
  return TENANT_TOPIC.test(topic);
}

/** The name a client uses for a topic: a tenant topic's short name, any other topic's own. */
export function clientTopicNameOf(topic: string): string {
  return isTenantTopic(topic) ? topic.slice(topic.indexOf('.', 'tenant.'.length) + 1) : topic;
}

/**
 * Whether a topic is an A2A agent's topic, its request topic or its events topic (`a2a.<tenant>.<agent>.requests`,
 * `.events`): served once the agent is registered, to its tenant only, and never published to but by the mesh.
 */
export function isAgentTopic(topic: string): boolean {
  return /^a2a\.[A-Za-z0-9_-]{1,64}\.[A-Za-z0-9._-]{1,64}\.(?:requests|events)$/.test(topic);
}

/**
 * Whether an agent topic (requests or events) is one of the tenant's agents' (only that tenant may subscribe to
 * it: the request topic is its agents' replicas' work, the events topic its observers').
 */
export function isAgentTopicOf(topic: string, tenant: string): boolean {
  return isAgentTopic(topic) && topic.startsWith(`a2a.${tenantKafkaPartOf(tenant)}.`);
}

/** The agent an agent topic is of (its name between the tenant part and the suffix); undefined for another topic. */
export function agentOfTopic(topic: string): string | undefined {
  if (!isAgentTopic(topic)) return undefined;
  return topic.slice(topic.indexOf('.', 'a2a.'.length) + 1, topic.lastIndexOf('.'));
}

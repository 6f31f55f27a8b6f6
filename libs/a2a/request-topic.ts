import { createHash } from 'node:crypto';

/** A tenant that can appear in a Kafka topic name as it is (letters, digits, `_`, `-`; no dots: they separate). */
const PLAIN_TENANT = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The Kafka topic an agent's tasks travel on: `a2a.<tenant>.<agent>.requests`, created when the agent is
 * registered. Agents are tenant-scoped, so the tenant is in the name; a tenant that is not a plain name (or that
 * starts with `x-`, the prefix of the other form) is written `x-<first 16 hex of its SHA-256>`. The tenant part
 * has no dots, so the name reads back unambiguously whatever dots the agent's name has.
 */
export function requestTopicOf(tenant: string, agent: string): string {
  return `a2a.${tenantPartOf(tenant)}.${agent}.requests`;
}

function tenantPartOf(tenant: string): string {
  return PLAIN_TENANT.test(tenant) && !tenant.startsWith('x-')
    ? tenant
    : `x-${createHash('sha256').update(tenant).digest('hex').slice(0, 16)}`;
}

/**
 * The Kafka topic an agent's task events travel on, for observers: `a2a.<tenant>.<agent>.events` (the tenant part
 * as in {@link requestTopicOf}), created with the request topic. Each event of each task's log is one frame there
 * (libs/a2a/task-event-publisher.ts).
 */
export function eventsTopicOf(tenant: string, agent: string): string {
  return `a2a.${tenantPartOf(tenant)}.${agent}.events`;
}

/**
 * Whether an agent topic (requests or events) is one of the tenant's agents' (only that tenant may subscribe to
 * it: the request topic is its agents' replicas' work, the events topic its observers').
 */
export function isAgentTopicOf(topic: string, tenant: string): boolean {
  return isAgentTopic(topic) && topic.startsWith(`a2a.${tenantPartOf(tenant)}.`);
}

/**
 * Whether a topic is an agent's topic, its request topic or its events topic (the forms above): served once the
 * agent is registered, to its tenant only, and never published to but by the mesh itself.
 */
export function isAgentTopic(topic: string): boolean {
  return /^a2a\.[A-Za-z0-9_-]{1,64}\.[A-Za-z0-9._-]{1,64}\.(?:requests|events)$/.test(topic);
}

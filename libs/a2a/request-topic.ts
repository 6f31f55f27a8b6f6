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
  return PLAIN_TENANT.test(tenant) && !tenant.startsWith('x-') ? tenant : `x-${createHash('sha256').update(tenant).digest('hex').slice(0, 16)}`;
}

/** Whether a request topic is one of the tenant's agents' (only its own agents' replicas may subscribe to it). */
export function isRequestTopicOf(topic: string, tenant: string): boolean {
  return isRequestTopic(topic) && topic.startsWith(`a2a.${tenantPartOf(tenant)}.`);
}

/** Whether a topic is an agent's request topic (its name is the form above). */
export function isRequestTopic(topic: string): boolean {
  return /^a2a\.[A-Za-z0-9_-]{1,64}\.[A-Za-z0-9._-]{1,64}\.requests$/.test(topic);
}

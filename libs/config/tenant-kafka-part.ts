import { createHash } from 'node:crypto';

/** A tenant that can appear in a Kafka topic name as it is (letters, digits, `_`, `-`; no dots: they separate). */
const PLAIN_TENANT = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * How a tenant appears in the Kafka topics made for it (A2A agents' topics, its own topics): as it is when it is a
 * plain name; otherwise (a dot, or the prefix `x-` of this other form) `x-<first 16 hex of its SHA-256>`. The part
 * has no dots, so a topic name carrying it reads back unambiguously.
 */
export function tenantKafkaPartOf(tenant: string): string {
  return PLAIN_TENANT.test(tenant) && !tenant.startsWith('x-')
    ? tenant
    : `x-${createHash('sha256').update(tenant).digest('hex').slice(0, 16)}`;
}

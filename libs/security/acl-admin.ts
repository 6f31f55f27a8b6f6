import { tenantKafkaPartOf } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { AclRuleRow, AclRuleStore } from '@libs/storage';
import { AclAction, AclEffect, problemOf } from './acl-rules';
import type { Caller } from './caller';

/** A rule as the admin API shows it. */
export interface AclRuleView {
  id: string;
  tenant: string;
  subject: string;
  action: AclAction;
  topic: string;
  effect: AclEffect;
  createdAt: string;
}

const FIELDS = ['subject', 'action', 'topic', 'effect'] as const;

const viewOf = (r: AclRuleRow): AclRuleView => ({
  id: r.id,
  tenant: r.tenant,
  subject: r.subject,
  action: r.action as AclAction,
  topic: r.topic,
  effect: r.effect as AclEffect,
  createdAt: r.createdAt.toISOString(),
});

/**
 * Whether a rule's topic pattern can only name topics of another namespace: the Kafka name of a tenant's own topic
 * (`tenant.<tenant>.<name>`, which no request names: a tenant names its own by the short name, and another's is
 * not its to name) or another tenant's agent topics (`a2a.<other tenant>.`). Decided on the pattern's literal
 * head, before its first wildcard. A rule only ever applies to its own tenant's callers (acl-rules.ts), so a
 * wildcard reaching further grants nothing of another tenant's either; this keeps what a tenant writes its own.
 */
function namesForeignTopics(tenant: string, pattern: string): boolean {
  const head = pattern.split(/[*?]/, 1)[0];
  if (head.startsWith('tenant.')) return true;
  if (!head.startsWith('a2a.')) return false;
  const own = `a2a.${tenantKafkaPartOf(tenant)}.`;
  return !(own.startsWith(head) || head.startsWith(own));
}

/**
 * The ACL's admin API (`/admin/acl/rules`): a tenant's admins list, add and delete their tenant's rules, never
 * another tenant's (which reads as no rule: 404). A rule is validated before it is stored; a malformed one is
 * refused with 400 and the field at fault, one naming another namespace's topics with 403. Every change applies on every instance within the refresh period.
 */
export class AclAdmin {
  constructor(private readonly store: AclRuleStore) {}

  async list(caller: Caller): Promise<AclRuleView[]> {
    return (await this.store.list(caller.tenant)).map(viewOf);
  }

  async add(caller: Caller, body: unknown): Promise<AclRuleView> {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'body: expected an object {subject, action, topic, effect}', {
        field: 'body',
      });
    }
    const unknown = Object.keys(body).find((k) => !(FIELDS as readonly string[]).includes(k));
    if (unknown !== undefined)
      throw new EventMeshError(ErrorCode.InvalidRequest, `${unknown}: not a field of a rule`, { field: unknown });
    const rule = body as Record<(typeof FIELDS)[number], unknown>;
    const problem = problemOf(rule);
    if (problem) throw new EventMeshError(ErrorCode.InvalidRequest, problem.message, { field: problem.field });
    const { subject, action, topic, effect } = rule as Record<(typeof FIELDS)[number], string>;
    if (namesForeignTopics(caller.tenant, topic))
      throw new EventMeshError(
        ErrorCode.Forbidden,
        `topic: "${topic}" names topics of another namespace; a tenant's rules name its own topics (their short names), its agents' and the shared ones`,
        { field: 'topic', reason: 'foreign_topic' },
      );
    return viewOf(await this.store.add(caller.tenant, { subject, action, topic, effect }));
  }

  async delete(caller: Caller, id: string): Promise<void> {
    if (!(await this.store.delete(caller.tenant, id)))
      throw new EventMeshError(ErrorCode.NotFound, `no ACL rule ${id}`);
  }
}

import type { AclDefault } from '@libs/config';
import type { AclRuleRow } from '@libs/storage';
import { Caller, GATE_ACTIONS, GateAction } from './caller';
import { compileTopicPattern, TopicPattern, TopicPatternError } from './topic-pattern';

export const ACL_EFFECTS = ['ALLOW', 'DENY'] as const;
export type AclEffect = (typeof ACL_EFFECTS)[number];
export type AclAction = GateAction | '*';

/** A rule as stored (`acl_rules`): every field as written, which may be malformed (by hand, by an older version). */
export type StoredAclRule = AclRuleRow;

/** A rule as the admin API takes it. */
export interface AclRuleInput {
  subject: string;
  action: AclAction;
  topic: string;
  effect: AclEffect;
}

/** Why a rule is malformed: the field and what is wrong with it (the admin API answers it as a 400). */
export interface AclRuleProblem {
  field: 'subject' | 'action' | 'topic' | 'effect';
  message: string;
}

/** A principal's name in a subject: no whitespace and no wildcard (the whole name `*` is the wildcard). */
const PRINCIPAL = /^[^\s*?]{1,256}$/;

/**
 * Who a rule is about. `principal:<name>`: that principal of the rule's tenant; `tenant:*` and `principal:*`:
 * every principal of the rule's tenant (rules only ever apply to their own tenant's callers, so the two say the
 * same thing; both are accepted because both read naturally).
 */
type Subject = { principal: string } | 'everyone';

function parseSubject(raw: string): Subject | AclRuleProblem {
  if (raw === 'tenant:*' || raw === 'principal:*') return 'everyone';
  if (raw.startsWith('principal:') && PRINCIPAL.test(raw.slice('principal:'.length)))
    return { principal: raw.slice('principal:'.length) };
  return { field: 'subject', message: 'subject: expected principal:<name>, principal:* or tenant:*' };
}

function parseAction(raw: string): AclAction | AclRuleProblem {
  return raw === '*' || (GATE_ACTIONS as readonly string[]).includes(raw)
    ? (raw as AclAction)
    : { field: 'action', message: `action: expected one of ${[...GATE_ACTIONS, '*'].join(', ')}` };
}

function parseEffect(raw: string): AclEffect | AclRuleProblem {
  return (ACL_EFFECTS as readonly string[]).includes(raw)
    ? (raw as AclEffect)
    : { field: 'effect', message: `effect: expected one of ${ACL_EFFECTS.join(', ')}` };
}

function parsePattern(raw: string): TopicPattern | AclRuleProblem {
  try {
    return compileTopicPattern(raw);
  } catch (e) {
    if (e instanceof TopicPatternError) return { field: 'topic', message: `topic: ${e.message}` };
    throw e;
  }
}

const isProblem = (x: unknown): x is AclRuleProblem =>
  typeof x === 'object' && x !== null && 'field' in x && 'message' in x;

/** The first thing wrong with a rule, or undefined when it is well formed (the admin API refuses the former). */
export function problemOf(rule: {
  subject: unknown;
  action: unknown;
  topic: unknown;
  effect: unknown;
}): AclRuleProblem | undefined {
  for (const [field, parse] of [
    ['subject', parseSubject],
    ['action', parseAction],
    ['topic', parsePattern],
    ['effect', parseEffect],
  ] as const) {
    const value = rule[field];
    if (typeof value !== 'string') return { field, message: `${field}: expected a string` };
    const parsed = (parse as (raw: string) => unknown)(value);
    if (isProblem(parsed)) return parsed;
  }
  return undefined;
}

/**
 * A rule ready to match. A malformed rule keeps the parts it could parse and lets each part it could not match
 * everything: it concerns every request it might have been meant for, and those are denied.
 */
interface CompiledRule {
  id: string;
  subject: Subject;
  action: AclAction;
  pattern: TopicPattern | 'any';
  effect: AclEffect | 'MALFORMED';
}

/** What the ACL decided, and why (the reason is audited and counted by the gate). */
export type AclDecision =
  | { allow: true; by: 'rule' | 'default' }
  | { allow: false; reason: 'acl_deny' | 'malformed_rule'; by: 'rule' | 'default'; ruleId?: string };

export interface MalformedRule {
  rule: StoredAclRule;
  problems: AclRuleProblem[];
}

/**
 * The ACL of the runtime, compiled from the stored rules: what every instance holds in memory and decides on
 * without I/O. For a request (caller, action, topic), the rules of the caller's tenant that concern it are those
 * whose subject names the caller, whose action is the request's or `*`, and whose pattern matches the topic (a
 * request with no topic: only the pattern `*`). A malformed rule that concerns it denies it (`malformed_rule`);
 * then DENY wins over ALLOW (`acl_deny`); no rule: the configured default.
 */
export class AclPolicy {
  private constructor(
    private readonly byTenant: ReadonlyMap<string, readonly CompiledRule[]>,
    private readonly fallback: AclDefault,
    /** The malformed rules, for the loader to log once and for /health. */
    readonly malformed: readonly MalformedRule[],
    readonly size: number,
  ) {}

  static compile(rules: readonly StoredAclRule[], fallback: AclDefault): AclPolicy {
    const byTenant = new Map<string, CompiledRule[]>();
    const malformed: MalformedRule[] = [];
    for (const rule of rules) {
      const subject = parseSubject(rule.subject);
      const action = parseAction(rule.action);
      const pattern = parsePattern(rule.topic);
      const effect = parseEffect(rule.effect);
      const problems = [subject, action, pattern, effect].filter(isProblem);
      if (problems.length > 0) malformed.push({ rule, problems });
      const compiled: CompiledRule = {
        id: rule.id,
        subject: isProblem(subject) ? 'everyone' : subject,
        action: isProblem(action) ? '*' : action,
        pattern: isProblem(pattern) ? 'any' : pattern,
        effect: problems.length > 0 ? 'MALFORMED' : (effect as AclEffect),
      };
      let list = byTenant.get(rule.tenant);
      if (!list) byTenant.set(rule.tenant, (list = []));
      list.push(compiled);
    }
    return new AclPolicy(byTenant, fallback, malformed, rules.length);
  }

  decide(caller: Caller, action: GateAction, topic: string | undefined): AclDecision {
    let allowed = false;
    let denied: string | undefined;
    for (const rule of this.byTenant.get(caller.tenant) ?? []) {
      if (rule.subject !== 'everyone' && rule.subject.principal !== caller.principal) continue;
      if (rule.action !== '*' && rule.action !== action) continue;
      if (rule.pattern !== 'any' && !rule.pattern.matches(topic)) continue;
      if (rule.effect === 'MALFORMED') return { allow: false, reason: 'malformed_rule', by: 'rule', ruleId: rule.id };
      if (rule.effect === 'DENY') denied ??= rule.id;
      else allowed = true;
    }
    if (denied !== undefined) return { allow: false, reason: 'acl_deny', by: 'rule', ruleId: denied };
    if (allowed) return { allow: true, by: 'rule' };
    return this.fallback === 'ALLOW'
      ? { allow: true, by: 'default' }
      : { allow: false, reason: 'acl_deny', by: 'default' };
  }
}

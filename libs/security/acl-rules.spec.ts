import { growthFrom, GROWTH_LIMIT } from '../../test/support/growth';
import type { Action, Caller } from './caller';
import { AclFilter } from './acl-filter';
import { AclPolicy, problemOf, StoredAclRule } from './acl-rules';
import { ErrorCode } from '@libs/errors';
import type { AuditRecord } from './audit-sink';
import { GateFilter, GateRefusal, GateRequest } from './gate-filter';
import { SecurityGate } from './security-gate';
import { compileTopicPattern, TopicPatternError } from './topic-pattern';

const caller = (principal: string, tenant = 'acme'): Caller => ({
  principal,
  tenant,
  scopes: ['publish', 'subscribe', 'admin'],
  via: 'jwt',
});

let seq = 0;
const rule = (subject: string, action: string, topic: string, effect: string, tenant = 'acme'): StoredAclRule => ({
  id: `00000000-0000-4000-8000-${String(++seq).padStart(12, '0')}`,
  tenant,
  subject,
  action,
  topic,
  effect,
  createdAt: new Date(0),
});

describe('topic patterns', () => {
  it.each([
    ['orders', 'orders', true],
    ['orders', 'orders2', false],
    ['orders', undefined, false],
    ['orders.*', 'orders.eu', true],
    ['orders.*', 'orders.', true],
    ['orders.*', 'orders', false],
    ['orders.*', 'xorders.eu', false],
    ['*.eu', 'orders.eu', true],
    ['*.eu', 'orders.us', false],
    ['or?ers', 'orders', true],
    ['or?ers', 'ordders', false],
    ['a*b*c', 'a-x-b-y-c', true],
    ['a*b*c', 'a-x-c-y-b', false],
    ['*', 'anything', true],
    ['*', undefined, true],
    ['**', undefined, true],
    ['orders.*', undefined, false],
  ] as const)('%s matches %s: %s', (pattern, topic, expected) => {
    expect(compileTopicPattern(pattern).matches(topic)).toBe(expected);
  });

  it.each(['', 'orders/eu', 'a b', 'x'.repeat(250), '%', 'orders\\'])('refuses %j', (pattern) => {
    expect(() => compileTopicPattern(pattern)).toThrow(TopicPatternError);
  });

  it('matches a pathological pattern in linear time (no backtracking)', () => {
    const pattern = compileTopicPattern(`${'*a'.repeat(100)}b`);
    expect(pattern.matches('a'.repeat(249))).toBe(false);
    // A backtracking matcher takes exponential time here (it never finishes); a linear one takes 4 times as long for
    // a topic 4 times longer, a quadratic one 16 times. Compared on this machine, not against a clock bound
    // (test/support/growth.ts): the longest topic name (249) and 4 times that.
    const growth = growthFrom(
      249,
      (n) => 'a'.repeat(n),
      (topic) => {
        if (pattern.matches(topic)) throw new Error('a near miss matched');
      },
    );
    expect(growth).toBeLessThan(GROWTH_LIMIT);
  });
});

describe('ACL decisions', () => {
  type Case = [
    string,
    StoredAclRule[],
    Caller,
    Action,
    string | undefined,
    'allow' | 'acl_deny' | 'malformed_rule',
    ('ALLOW' | 'DENY')?,
  ];
  const cases: Case[] = [
    ['no rule: the default DENY', [], caller('alice'), 'publish', 'orders', 'acl_deny'],
    ['no rule: the default ALLOW', [], caller('alice'), 'publish', 'orders', 'allow', 'ALLOW'],
    [
      'an ALLOW for the principal',
      [rule('principal:alice', 'publish', 'orders', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders',
      'allow',
    ],
    [
      'an ALLOW for another principal',
      [rule('principal:bob', 'publish', 'orders', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders',
      'acl_deny',
    ],
    [
      'an ALLOW for another action',
      [rule('principal:alice', 'subscribe', 'orders', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders',
      'acl_deny',
    ],
    [
      'an ALLOW with action *',
      [rule('principal:alice', '*', 'orders', 'ALLOW')],
      caller('alice'),
      'admin',
      'orders',
      'allow',
    ],
    [
      'an ALLOW for tenant:*',
      [rule('tenant:*', 'publish', 'orders.*', 'ALLOW')],
      caller('carol'),
      'publish',
      'orders.eu',
      'allow',
    ],
    [
      'an ALLOW for principal:*',
      [rule('principal:*', 'publish', '*', 'ALLOW')],
      caller('carol'),
      'publish',
      'x',
      'allow',
    ],
    [
      "another tenant's ALLOW does not apply",
      [rule('tenant:*', '*', '*', 'ALLOW', 'other')],
      caller('alice'),
      'publish',
      'orders',
      'acl_deny',
    ],
    [
      "another tenant's DENY does not apply",
      [rule('tenant:*', '*', '*', 'DENY', 'other')],
      caller('alice'),
      'publish',
      'orders',
      'allow',
      'ALLOW',
    ],
    [
      'DENY wins over ALLOW (DENY first)',
      [rule('tenant:*', 'publish', 'orders.*', 'DENY'), rule('principal:alice', 'publish', 'orders.eu', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders.eu',
      'acl_deny',
    ],
    [
      'DENY wins over ALLOW (ALLOW first)',
      [rule('principal:alice', 'publish', 'orders.eu', 'ALLOW'), rule('tenant:*', 'publish', 'orders.*', 'DENY')],
      caller('alice'),
      'publish',
      'orders.eu',
      'acl_deny',
    ],
    [
      'DENY wins over the default ALLOW',
      [rule('principal:alice', '*', '*', 'DENY')],
      caller('alice'),
      'subscribe',
      'x',
      'acl_deny',
      'ALLOW',
    ],
    [
      'a DENY on another topic leaves the ALLOW',
      [rule('tenant:*', 'publish', 'payments', 'DENY'), rule('tenant:*', 'publish', '*', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders',
      'allow',
    ],
    [
      'no topic: a glob does not match',
      [rule('principal:alice', 'subscribe', 'orders.*', 'ALLOW')],
      caller('alice'),
      'subscribe',
      undefined,
      'acl_deny',
    ],
    [
      'no topic: * matches',
      [rule('principal:alice', 'admin', '*', 'ALLOW')],
      caller('alice'),
      'admin',
      undefined,
      'allow',
    ],
    [
      'malformed action: denies what it may concern',
      [rule('principal:alice', 'publsh', 'orders', 'ALLOW'), rule('principal:alice', 'publish', 'orders', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders',
      'malformed_rule',
    ],
    [
      'malformed effect',
      [rule('principal:alice', 'publish', 'orders', 'PERMIT'), rule('tenant:*', '*', '*', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders',
      'malformed_rule',
    ],
    [
      'malformed pattern: concerns every topic',
      [rule('principal:alice', 'publish', 'orders/eu', 'ALLOW'), rule('tenant:*', '*', '*', 'ALLOW')],
      caller('alice'),
      'publish',
      'anything',
      'malformed_rule',
    ],
    [
      'malformed subject: concerns every principal',
      [rule('user:alice', 'publish', 'orders', 'ALLOW'), rule('tenant:*', '*', '*', 'ALLOW')],
      caller('bob'),
      'publish',
      'orders',
      'malformed_rule',
    ],
    [
      'a malformed rule for another principal does not concern alice',
      [rule('principal:bob', 'publsh', 'orders', 'ALLOW'), rule('tenant:*', '*', '*', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders',
      'allow',
    ],
    [
      'a malformed rule for another action does not concern the request',
      [rule('principal:alice', 'subscribe', 'orders/x', 'ALLOW'), rule('tenant:*', '*', '*', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders',
      'allow',
    ],
    [
      'a malformed rule of another tenant does not concern it',
      [rule('principal:alice', 'publsh', 'orders', 'ALLOW', 'other'), rule('tenant:*', '*', '*', 'ALLOW')],
      caller('alice'),
      'publish',
      'orders',
      'allow',
    ],
  ];

  it.each(cases)('%s', (_, rules, who, action, topic, expected, fallback = 'DENY') => {
    const decision = AclPolicy.compile(rules, fallback).decide(who, action, topic);
    expect(decision.allow ? 'allow' : decision.reason).toBe(expected);
  });

  it('lists the malformed rules and what is wrong with each', () => {
    const bad = rule('principal:alice', 'publsh', 'orders/eu', 'MAYBE');
    const policy = AclPolicy.compile([bad, rule('tenant:*', '*', '*', 'ALLOW')], 'DENY');
    expect(policy.malformed).toHaveLength(1);
    expect(policy.malformed[0].problems.map((p) => p.field)).toEqual(['action', 'topic', 'effect']);
  });

  it.each([
    [{ subject: 'principal:alice', action: 'publish', topic: 'orders.*', effect: 'ALLOW' }, undefined],
    [{ subject: 'alice', action: 'publish', topic: 'orders', effect: 'ALLOW' }, 'subject'],
    [{ subject: 'principal:al*ce', action: 'publish', topic: 'orders', effect: 'ALLOW' }, 'subject'],
    [{ subject: 'principal:alice', action: 'write', topic: 'orders', effect: 'ALLOW' }, 'action'],
    [{ subject: 'principal:alice', action: 'publish', topic: 'orders eu', effect: 'ALLOW' }, 'topic'],
    [{ subject: 'principal:alice', action: 'publish', topic: 'orders', effect: 'allow' }, 'effect'],
    [{ subject: 'principal:alice', action: 'publish', topic: 7, effect: 'ALLOW' }, 'topic'],
  ])('validates %j: problem in %s', (input, field) => {
    expect(problemOf(input)?.field).toBe(field);
  });
});

describe('AclFilter', () => {
  /** A rule source like the store: a version that moves with every change, and every rule at it. */
  class Rules {
    version = 0;
    rules: StoredAclRule[] = [];
    snapshots = 0;
    set(rules: StoredAclRule[]) {
      this.rules = rules;
      this.version++;
    }
    source = {
      version: () => Promise.resolve(this.version),
      snapshot: () => {
        this.snapshots++;
        return Promise.resolve({ version: this.version, rules: [...this.rules] });
      },
    };
  }
  const publish = (topic?: string): GateRequest => ({
    route: 'POST /events/publish',
    action: 'publish',
    topic,
    headers: {},
    remoteAddress: '127.0.0.1',
    requestId: 'r',
  });
  let filter: AclFilter | undefined;
  afterEach(() => filter?.close());

  it('loads on first use, decides from memory, and reloads only when the version moves', async () => {
    const rules = new Rules();
    rules.set([rule('principal:alice', 'publish', 'orders', 'ALLOW')]);
    filter = new AclFilter(rules.source, { refreshMs: 60_000, default: 'DENY' });
    await expect(
      Promise.resolve(filter.check({ request: publish('orders'), caller: caller('alice') })),
    ).resolves.toMatchObject({ allow: true });
    const verdict = await filter.check({ request: publish('payments'), caller: caller('alice') });
    expect(verdict).toMatchObject({
      allow: false,
      refusal: { code: 'FORBIDDEN', reason: 'acl_deny', message: 'not allowed to publish to topic "payments"' },
    });
    await filter.refresh();
    expect(rules.snapshots).toBe(1);
    rules.set([rule('principal:alice', 'publish', '*', 'ALLOW')]);
    await filter.refresh();
    expect(rules.snapshots).toBe(2);
    expect(filter.check({ request: publish('payments'), caller: caller('alice') })).toMatchObject({ allow: true });
  });

  it('denies what a malformed rule concerns, counts it, and warns once per version of the rule', async () => {
    const rules = new Rules();
    const bad = rule('principal:alice', 'publsh', 'orders', 'ALLOW');
    rules.set([bad, rule('tenant:*', '*', '*', 'ALLOW')]);
    filter = new AclFilter(rules.source, { refreshMs: 60_000, default: 'DENY' });
    const warn = jest.spyOn((filter as unknown as { log: { warn: (...a: unknown[]) => void } }).log, 'warn');
    const verdict = await filter.check({ request: publish('orders'), caller: caller('alice') });
    expect(verdict).toMatchObject({
      allow: false,
      refusal: { code: 'FORBIDDEN', reason: 'malformed_rule', message: 'not allowed to publish to topic "orders"' },
    });
    expect(filter.stats()).toMatchObject({ malformedRules: 1, malformedDenies: 1 });
    rules.set([...rules.rules, rule('principal:bob', 'publish', 'x', 'ALLOW')]);
    await filter.refresh();
    expect(warn).toHaveBeenCalledTimes(1);
    rules.set([{ ...bad, topic: 'orders/eu' }, ...rules.rules.slice(1)]);
    await filter.refresh();
    expect(warn).toHaveBeenCalledTimes(2);
  });

  it.each([
    ['enforcing', true],
    ['report-only', false],
  ])(
    '%s: a gate refuses (403) what a malformed rule concerns (fail safe), counts it, audits it enforced, warns once per rule',
    async (_, failClosed) => {
      const rules = new Rules();
      rules.set([rule('principal:alice', 'publsh', 'orders', 'ALLOW'), rule('tenant:*', '*', '*', 'ALLOW')]);
      filter = new AclFilter(rules.source, { refreshMs: 60_000, default: 'DENY' });
      const warn = jest.spyOn((filter as unknown as { log: { warn: (...a: unknown[]) => void } }).log, 'warn');
      const records: AuditRecord[] = [];
      const alice = caller('alice');
      const token: GateFilter = { name: 'token', check: () => ({ allow: true, caller: alice }) };
      const gate = new SecurityGate({
        name: 'ingress',
        filters: [token, filter],
        failClosed,
        audit: { record: (r) => records.push(r) },
        auditAllows: false,
      });
      for (let i = 0; i < 3; i++) {
        await expect(gate.admit(publish('orders'))).rejects.toMatchObject({
          code: 'FORBIDDEN',
          reason: 'malformed_rule',
        });
        await filter.refresh();
      }
      // What the rule does not concern passes, in both modes.
      await expect(gate.admit(publish('payments'))).resolves.toMatchObject({ caller: alice });
      expect(gate.stats().denied).toEqual({ 'acl:malformed_rule': 3 });
      expect(records).toHaveLength(3);
      expect(records.every((r) => r.enforced && r.reason === 'malformed_rule')).toBe(true);
      expect(warn).toHaveBeenCalledTimes(1);
    },
  );

  it("report-only: a malformed rule's refusal is answered even after an earlier filter's refusal was let through", async () => {
    const rules = new Rules();
    // The caller TokenAuth refused proceeds as ANONYMOUS, of tenant default: the malformed rule is that tenant's.
    rules.set([rule('tenant:*', 'publsh', '*', 'ALLOW', 'default')]);
    filter = new AclFilter(rules.source, { refreshMs: 60_000, default: 'ALLOW' });
    const token: GateFilter = {
      name: 'token',
      check: () => ({ allow: false, refusal: new GateRefusal(ErrorCode.Unauthenticated, 'no', 'missing') }),
    };
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [token, filter],
      failClosed: false,
      audit: { record: () => undefined },
      auditAllows: false,
    });
    await expect(gate.admit(publish('orders'))).rejects.toMatchObject({ code: 'FORBIDDEN', reason: 'malformed_rule' });
    expect(gate.stats().denied).toEqual({ 'token:missing': 1, 'acl:malformed_rule': 1 });
  });

  it('always allows an authenticated super user, never an unauthenticated caller of the same name', async () => {
    const rules = new Rules();
    filter = new AclFilter(rules.source, { refreshMs: 60_000, default: 'DENY', superUsers: ['acme/root'] });
    const root = { ...caller('root'), tenant: 'acme', via: 'jwt' as const };
    expect(await filter.check({ request: publish(), caller: root })).toMatchObject({ allow: true });
    expect(await filter.check({ request: publish(), caller: { ...root, via: 'none' } })).toMatchObject({
      allow: false,
    });
    expect(await filter.check({ request: publish(), caller: { ...root, tenant: 'other' } })).toMatchObject({
      allow: false,
    });
  });
});

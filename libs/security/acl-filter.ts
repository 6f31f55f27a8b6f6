import type { AclDefault } from '@libs/config';
import { ErrorCode } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { AclPolicy, StoredAclRule } from './acl-rules';
import type { GateAction } from './caller';
import { ALLOW, GateContext, GateFilter, GateRefusal, Verdict } from './gate-filter';

/** Where the ACL filter reads the rules: the version it polls, and every rule when it moved (AclRuleStore). */
export interface AclRuleSource {
  version(): Promise<number>;
  snapshot(): Promise<{ version: number; rules: StoredAclRule[] }>;
}

export interface AclFilterOptions {
  /** How often the version is polled (EVENTMESH_SECURITY_GATE_ACL_REFRESH_MS). */
  refreshMs: number;
  /** The verdict when no rule concerns a request (EVENTMESH_SECURITY_GATE_ACL_DEFAULT). */
  default: AclDefault;
  /** `tenant/principal` of authenticated callers always allowed (EVENTMESH_SECURITY_GATE_ACL_SUPER_USERS). */
  superUsers?: readonly string[];
}

/** What /health and tests may read of the ACL filter. */
export interface AclFilterStats {
  version: number;
  rules: number;
  malformedRules: number;
  /** Requests denied because a malformed rule concerned them. */
  malformedDenies: number;
  /** Polls that failed (the rules in memory stay as they were). */
  refreshFailures: number;
}

const VERB: Record<GateAction, string> = {
  publish: 'publish to',
  subscribe: 'subscribe to',
  admin: 'administer',
  'agent.serve': 'serve agent',
  'agent.call': 'call agent',
  'session.publish': 'publish to session',
  'session.subscribe': 'subscribe to session',
};

/**
 * The ACL link of the gate. Every rule of every tenant is held in memory (an AclPolicy) and a request is decided
 * there, with no I/O. Every `refreshMs` the filter reads the rules' version (one primary-key row) and, when it
 * moved, reloads and recompiles every rule: a change made on any instance (or by hand in SQL) applies on every
 * instance within one refresh period plus one reload, without a restart. Until the first load the filter waits
 * for it; a failed poll keeps the rules in memory and is retried at the next period.
 *
 * A malformed rule (unknown action or effect, a bad subject or topic pattern) is logged at WARN once per version
 * of the rule (its content), and every request it concerns is denied with reason `malformed_rule` (counted by the
 * gate, and here). A refusal names the action and the topic only: never the rule, its tenant or its subject.
 */
export class AclFilter implements GateFilter {
  readonly name = 'acl' as const;
  private readonly log = createLogger('AclFilter');
  private policy: AclPolicy | undefined;
  private version = -1;
  private loading: Promise<AclPolicy> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private malformedDenies = 0;
  private refreshFailures = 0;
  /** Malformed rules already logged, by content: logged again only when the rule changes. */
  private warned = new Set<string>();
  private readonly superUsers: ReadonlySet<string>;

  constructor(
    private readonly source: AclRuleSource,
    private readonly options: AclFilterOptions,
  ) {
    this.superUsers = new Set(options.superUsers ?? []);
    this.schedule();
  }

  check({ request, caller }: GateContext): Verdict | Promise<Verdict> {
    // A sessions connection's operations are decided one by one, on their names; the connection itself is not.
    if (request.connection) return ALLOW;
    if (caller.via !== 'none' && this.superUsers.has(`${caller.tenant}/${caller.principal}`)) return ALLOW;
    if (this.policy) return this.decide(this.policy, caller, request.action, request.topic);
    return this.load().then((policy) => this.decide(policy, caller, request.action, request.topic));
  }

  stats(): AclFilterStats {
    return {
      version: this.version,
      rules: this.policy?.size ?? 0,
      malformedRules: this.policy?.malformed.length ?? 0,
      malformedDenies: this.malformedDenies,
      refreshFailures: this.refreshFailures,
    };
  }

  /** Polls now (tests; the timer does it every refreshMs). */
  async refresh(): Promise<void> {
    const version = await this.source.version();
    if (version !== this.version || !this.policy) await this.load();
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private decide(
    policy: AclPolicy,
    caller: GateContext['caller'],
    action: GateAction,
    topic: string | undefined,
  ): Verdict {
    const decision = policy.decide(caller, action, topic);
    if (decision.allow) return ALLOW;
    if (decision.reason === 'malformed_rule') this.malformedDenies++;
    const noun = action.includes('.') ? '' : 'topic ';
    const what = topic === undefined ? VERB[action].replace(/ to$/, '') : `${VERB[action]} ${noun}"${topic}"`;
    // A malformed rule's refusal is enforced even by a report-only gate (docs/security.md: fail safe).
    return {
      allow: false,
      refusal: new GateRefusal(
        ErrorCode.Forbidden,
        `not allowed to ${what}`,
        decision.reason,
        {},
        {},
        decision.reason === 'malformed_rule',
      ),
    };
  }

  /** Loads and compiles every rule; concurrent callers share one load. */
  private load(): Promise<AclPolicy> {
    this.loading ??= (async () => {
      try {
        const snapshot = await this.source.snapshot();
        const policy = AclPolicy.compile(snapshot.rules, this.options.default);
        this.warnMalformed(policy, snapshot.version);
        this.policy = policy;
        this.version = snapshot.version;
        return policy;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  private warnMalformed(policy: AclPolicy, version: number): void {
    const seen = new Set<string>();
    for (const { rule, problems } of policy.malformed) {
      const key = JSON.stringify([rule.id, rule.tenant, rule.subject, rule.action, rule.topic, rule.effect]);
      seen.add(key);
      if (this.warned.has(key)) continue;
      this.log.warn(
        { ruleId: rule.id, tenant: rule.tenant, aclVersion: version, problems: problems.map((p) => p.message) },
        'malformed ACL rule: every request it concerns is denied until it is fixed or deleted',
      );
    }
    this.warned = seen;
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.refresh()
        .catch((e: Error) => {
          this.refreshFailures++;
          this.log.warn(
            { error: e.message, version: this.version },
            'ACL refresh failed; the rules in memory stay in force',
          );
        })
        .finally(() => this.schedule());
    }, this.options.refreshMs);
    this.timer.unref();
  }
}

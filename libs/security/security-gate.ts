import { createLogger, isoNow } from '@libs/logging';
import type { AuditRecord, AuditSink, AuditSinkStats } from './audit-sink';
import { ANONYMOUS, Caller, UNAUTHENTICATED } from './caller';
import type { GateFilter, GateRefusal, GateRequest, Verdict } from './gate-filter';
import { requestIdOf } from './request-id';
import { missingCredential } from './token-refusals';

/** What the gate let through: who the caller is, and what to release when the request ends (stream quota). */
export interface Admission {
  caller: Caller;
  /** Releases what the admission holds (an open stream connection of the tenant's quota). Idempotent. */
  release(): void;
  /**
   * Gives back what the admission charged (the events and bytes of a publish) when the route refuses the request
   * after the gate (invalid events, an unknown topic, shed before anything was written): a refused request is not
   * charged. Idempotent; a no-op for what charged nothing.
   */
  refund(): void;
}

export interface SecurityGateOptions {
  /** `ingress` or `admin`: named in audit records, logs and /health. */
  name: string;
  /** The chain, in order (TokenAuth, SignatureVerifier, ACL, TenantQuota). Empty: the gate is open. */
  filters: GateFilter[];
  failClosed: boolean;
  audit: AuditSink;
  /** Audit every decision, or refusals only. */
  auditAllows: boolean;
}

/** Counters of one gate, for /health. */
export interface GateStats {
  mode: 'open' | 'enforcing' | 'report-only';
  filters: string[];
  allowed: number;
  /** Refused (enforcing) or would have been refused (report-only), by `filter:reason`. */
  denied: Record<string, number>;
  /** Filters that could not decide (a store down), by filter. */
  errors: Record<string, number>;
  auditFailures: number;
  /** The audit sink's writes (shared by both gates of an instance), when the sink reports them. */
  audit?: AuditSinkStats;
}

const NOTHING_HELD = () => undefined;
const OPEN_ADMISSION: Admission = Object.freeze({ caller: ANONYMOUS, release: NOTHING_HELD, refund: NOTHING_HELD });

/**
 * The request's id, made when first needed (an audit record or a log line), and the same one after: most admitted
 * requests are not audited, and need none.
 */
function idOf(request: GateRequest): string {
  return (request.requestId ??= requestIdOf(request.headers));
}

/**
 * The one request gate: runs its filters in order for every request of the routes it guards, then audits the
 * decision. Fail-closed, the first refusal ends the chain and is thrown (the route answers it and writes nothing).
 * Report-only, every filter runs, each refusal is counted and audited, and the request proceeds, as the caller
 * the chain established (`UNAUTHENTICATED`, tenant `default` without the admin scope, when TokenAuth refused); a
 * fail-safe refusal (a malformed ACL rule; TokenAuth's on a privileged route) is answered in both modes, since
 * letting it through would grant what nobody wrote. A filter that cannot decide
 * throws: fail-closed, the request fails with that error (503 when its store is down); report-only, it is counted
 * and the request proceeds.
 */
export class SecurityGate {
  private readonly log = createLogger('SecurityGate');
  private allowed = 0;
  private readonly denied = new Map<string, number>();
  private readonly errors = new Map<string, number>();
  private auditFailures = 0;

  constructor(private readonly options: SecurityGateOptions) {}

  /** No filter configured: every request is admitted as `ANONYMOUS` and nothing is audited. */
  get open(): boolean {
    return this.options.filters.length === 0;
  }

  get name(): string {
    return this.options.name;
  }

  get failClosed(): boolean {
    return this.options.failClosed;
  }

  async admit(request: GateRequest): Promise<Admission> {
    if (this.open) return OPEN_ADMISSION;
    let caller = UNAUTHENTICATED;
    // What filters hold (a stream connection of the quota): most requests hold nothing, and allocate nothing here.
    let held: (() => void)[] | undefined;
    let charged: (() => void)[] | undefined;
    let refused: { filter: string; refusal: GateRefusal; failSafe: boolean } | undefined;
    const release = () => {
      const holding = held;
      held = undefined;
      holding?.forEach((r) => r());
    };
    const refund = () => {
      const owed = charged;
      charged = undefined;
      owed?.forEach((r) => r());
    };
    for (const filter of this.options.filters) {
      let verdict: Verdict;
      try {
        if (filter.name !== 'token' && request.topicOf) {
          const resolve = request.topicOf;
          request.topicOf = undefined;
          request.topic = await resolve(caller);
        }
        // A filter that decides from memory answers at once: no promise to wait for on the hot path.
        const decided =
          filter.name === 'token' && request.authenticated ? request.authenticated : filter.check({ request, caller });
        verdict = decided instanceof Promise ? await decided : decided;
      } catch (e) {
        this.errors.set(filter.name, (this.errors.get(filter.name) ?? 0) + 1);
        this.log.error(
          {
            gate: this.name,
            filter: filter.name,
            route: request.route,
            requestId: idOf(request),
            error: (e as Error).message,
          },
          'gate filter could not decide',
        );
        if (this.options.failClosed) {
          release();
          refund();
          this.audit(request, caller, { filter: filter.name, reason: 'filter_error', enforced: true });
          throw e;
        }
        continue;
      }
      if (verdict.allow) {
        if (verdict.caller) caller = verdict.caller;
        if (verdict.release) (held ??= []).push(verdict.release);
        if (verdict.refund) (charged ??= []).push(verdict.refund);
        continue;
      }
      if (verdict.caller) caller = verdict.caller;
      const key = `${filter.name}:${verdict.refusal.reason}`;
      this.denied.set(key, (this.denied.get(key) ?? 0) + 1);
      // A privileged route's TokenAuth refusal is answered whatever the mode: report-only would otherwise run the
      // request as tenant `default` (the operator tenant unless configured otherwise), and hand credentials, quotas
      // and operator actions to whoever sent a garbage token.
      const failSafe = verdict.refusal.failSafe || (request.privileged === true && filter.name === 'token');
      // A fail-safe refusal is answered whatever the mode, and is the one answered even after a report-only one.
      if (failSafe) refused = { filter: filter.name, refusal: verdict.refusal, failSafe };
      else refused ??= { filter: filter.name, refusal: verdict.refusal, failSafe };
      if (this.options.failClosed || failSafe) break;
    }
    // A gate without TokenAuth authenticates nobody: a privileged route is refused as if nothing was sent.
    if (!refused && request.privileged && caller.via === 'none') {
      const refusal = missingCredential();
      const key = `token:${refusal.reason}`;
      this.denied.set(key, (this.denied.get(key) ?? 0) + 1);
      refused = { filter: 'token', refusal, failSafe: true };
    }
    if (refused) {
      const enforced = this.options.failClosed || refused.failSafe;
      this.audit(request, caller, { filter: refused.filter, reason: refused.refusal.reason, enforced });
      if (enforced) {
        release();
        refund();
        throw refused.refusal;
      }
    } else {
      this.allowed++;
      if (this.options.auditAllows) this.audit(request, caller);
    }
    return { caller, release: held ? release : NOTHING_HELD, refund: charged ? refund : NOTHING_HELD };
  }

  /**
   * Runs TokenAuth on the request's headers alone, before its body is read (a publish): when the gate enforces, a
   * caller TokenAuth refuses (or cannot decide on) is refused here, counted and audited as by `admit`, so the body
   * of an unauthenticated request is never read. The verdict stays on the request for `admit`. Report-only, it
   * refuses so only a privileged request (an admin route's, refused whatever the mode); without TokenAuth first it
   * decides nothing: the request goes on and `admit` decides on the whole of it.
   */
  async authenticate(request: GateRequest): Promise<void> {
    const token = this.options.filters[0];
    if ((!this.options.failClosed && !request.privileged) || token?.name !== 'token') return;
    const verdict = (request.authenticated = new Promise<Verdict>((resolve) =>
      resolve(token.check({ request, caller: UNAUTHENTICATED })),
    ));
    const decided = await verdict.catch(() => undefined);
    // Refused or undecided: `admit` throws its answer now, with the count and the audit record.
    if (!decided?.allow) await this.admit(request);
  }

  stats(): GateStats {
    return {
      mode: this.open ? 'open' : this.options.failClosed ? 'enforcing' : 'report-only',
      filters: this.options.filters.map((f) => f.name),
      allowed: this.allowed,
      denied: Object.fromEntries(this.denied),
      errors: Object.fromEntries(this.errors),
      auditFailures: this.auditFailures,
      audit: this.options.audit.stats?.(),
    };
  }

  async close(): Promise<void> {
    for (const filter of this.options.filters) await filter.close?.();
    await this.options.audit.close?.();
  }

  private audit(
    request: GateRequest,
    caller: Caller,
    deny?: { filter: string; reason: string; enforced: boolean },
  ): void {
    const record: AuditRecord = {
      time: isoNow(),
      gate: this.name,
      requestId: idOf(request),
      principal: caller.principal,
      tenant: caller.tenant,
      route: request.route,
      action: request.action,
      topic: request.topic,
      decision: deny ? 'deny' : 'allow',
      enforced: deny?.enforced ?? false,
      filter: deny?.filter,
      reason: deny?.reason,
      remoteAddress: request.remoteAddress,
    };
    try {
      this.options.audit.record(record);
    } catch (e) {
      // Audit must not take the data path down: the request proceeds.
      this.auditFailures++;
      this.log.error({ gate: this.name, requestId: idOf(request), error: (e as Error).message }, 'audit record failed');
    }
  }
}

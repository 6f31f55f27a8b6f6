import { ACTIONS, ALLOW, GateContext, GateFilter, LoggingAuditSink, SecurityGate, Verdict } from '../../libs/security';

/** The gate's TokenAuth stand-in: the caller's tenant comes from `x-test-tenant` (every action allowed to it). */
export class HeaderTenantFilter implements GateFilter {
  readonly name = 'token';
  check({ request }: GateContext): Verdict {
    const tenant = request.headers['x-test-tenant'];
    if (typeof tenant !== 'string') return ALLOW;
    return { allow: true, caller: { principal: `svc-${tenant}`, tenant, scopes: ACTIONS, via: 'jwt' } };
  }
}

/** A fail-closed gate of that one filter, auditing its refusals to the log. */
export function headerTenantGate(name: string): SecurityGate {
  return new SecurityGate({ name, filters: [new HeaderTenantFilter()], failClosed: true, audit: new LoggingAuditSink(), auditAllows: false });
}

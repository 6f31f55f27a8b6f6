import { ErrorCode } from '@libs/errors';
import type { AuditRecord, AuditSink } from './audit-sink';
import { ANONYMOUS, Caller, UNAUTHENTICATED } from './caller';
import { GateFilter, GateRefusal, GateRequest, Verdict } from './gate-filter';
import { SecurityGate } from './security-gate';

const ALICE: Caller = { principal: 'alice', tenant: 'acme', scopes: ['publish'], via: 'jwt' };

class Recorded implements AuditSink {
  readonly records: AuditRecord[] = [];
  record(r: AuditRecord): void {
    this.records.push(r);
  }
}

function filter(
  name: GateFilter['name'],
  decide: (request: GateRequest, caller: Caller) => Verdict | Promise<Verdict>,
): GateFilter & { calls: number } {
  const f = {
    name,
    calls: 0,
    check: ({ request, caller }: { request: GateRequest; caller: Caller }) => {
      f.calls++;
      return decide(request, caller);
    },
  };
  return f;
}

const request = (over: Partial<GateRequest> = {}): GateRequest => ({
  route: 'POST /events/publish',
  action: 'publish',
  topic: 'orders',
  headers: {},
  remoteAddress: '127.0.0.1',
  requestId: 'r-1',
  ...over,
});

const deny = (
  reason: string,
  code = ErrorCode.Unauthenticated as ErrorCode.Unauthenticated | ErrorCode.Forbidden,
): Verdict => ({
  allow: false,
  refusal: new GateRefusal(code, `refused: ${reason}`, reason),
});

describe('SecurityGate', () => {
  it('is open with no filter: admits as ANONYMOUS and audits nothing', async () => {
    const audit = new Recorded();
    const gate = new SecurityGate({ name: 'ingress', filters: [], failClosed: true, audit, auditAllows: true });
    expect(gate.open).toBe(true);
    expect((await gate.admit(request())).caller).toBe(ANONYMOUS);
    expect(audit.records).toHaveLength(0);
    expect(gate.stats().mode).toBe('open');
  });

  it('authenticates on the headers alone when enforcing: refuses there (counted, audited), and admit asks TokenAuth no more', async () => {
    const audit = new Recorded();
    const token = filter('token', (r) => (r.headers.authorization ? { allow: true, caller: ALICE } : deny('no_token')));
    const signature = filter('signature', (r) => (r.body ? { allow: true } : deny('no_body', ErrorCode.Forbidden)));
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [token, signature],
      failClosed: true,
      audit,
      auditAllows: false,
    });
    await expect(gate.authenticate(request())).rejects.toMatchObject({
      code: ErrorCode.Unauthenticated,
      reason: 'no_token',
    });
    expect(signature.calls).toBe(0);
    expect(audit.records).toEqual([
      expect.objectContaining({ decision: 'deny', enforced: true, filter: 'token', reason: 'no_token' }),
    ]);
    const known = request({ headers: { authorization: 'x' } });
    await gate.authenticate(known);
    known.body = Buffer.from('{}');
    expect((await gate.admit(known)).caller).toBe(ALICE);
    expect(token.calls).toBe(2);
    expect(gate.stats()).toMatchObject({ allowed: 1, denied: { 'token:no_token': 1 } });
    // Report-only, nothing is decided before the body: admit decides on the whole request.
    const reporting = new SecurityGate({
      name: 'ingress',
      filters: [filter('token', () => deny('no_token'))],
      failClosed: false,
      audit,
      auditAllows: false,
    });
    await expect(reporting.authenticate(request())).resolves.toBeUndefined();
    expect(reporting.stats().denied).toEqual({});
  });

  it('fail-closed: throws the first refusal, runs no later filter, and audits the enforced deny', async () => {
    const audit = new Recorded();
    const acl = filter('acl', () => ({ allow: true }));
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [filter('token', () => deny('expired')), acl],
      failClosed: true,
      audit,
      auditAllows: true,
    });
    await expect(gate.admit(request())).rejects.toMatchObject({ code: ErrorCode.Unauthenticated, reason: 'expired' });
    expect(acl.calls).toBe(0);
    expect(audit.records).toEqual([
      expect.objectContaining({
        decision: 'deny',
        enforced: true,
        filter: 'token',
        reason: 'expired',
        principal: 'anonymous',
        requestId: 'r-1',
      }),
    ]);
    expect(gate.stats()).toMatchObject({ mode: 'enforcing', allowed: 0, denied: { 'token:expired': 1 } });
  });

  it('report-only: every filter runs, each refusal is counted, the request proceeds and the first refusal is audited', async () => {
    const audit = new Recorded();
    const acl = filter('acl', () => deny('acl_deny', ErrorCode.Forbidden));
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [filter('token', () => deny('expired')), acl],
      failClosed: false,
      audit,
      auditAllows: false,
    });
    const admission = await gate.admit(request());
    // Tenant `default` for the data path, never the admin scope: a refused token is no operator.
    expect(admission.caller).toBe(UNAUTHENTICATED);
    expect(acl.calls).toBe(1);
    expect(gate.stats()).toMatchObject({ mode: 'report-only', denied: { 'token:expired': 1, 'acl:acl_deny': 1 } });
    expect(audit.records).toEqual([
      expect.objectContaining({ decision: 'deny', enforced: false, filter: 'token', reason: 'expired' }),
    ]);
  });

  it("report-only: answers TokenAuth's refusal of a privileged route, audited as enforced; lets an authenticated admin through", async () => {
    const audit = new Recorded();
    const gate = new SecurityGate({
      name: 'admin',
      filters: [filter('token', () => deny('malformed'))],
      failClosed: false,
      audit,
      auditAllows: false,
    });
    const admin = request({ route: 'PUT /admin/tenants/:tenant/quota', action: 'admin', privileged: true });
    await expect(gate.admit(admin)).rejects.toMatchObject({ code: ErrorCode.Unauthenticated, reason: 'malformed' });
    expect(audit.records).toEqual([
      expect.objectContaining({ decision: 'deny', enforced: true, filter: 'token', reason: 'malformed' }),
    ]);
    const ops: Caller = { principal: 'root', tenant: 'default', scopes: ['admin'], via: 'jwt' };
    const authenticated = new SecurityGate({
      name: 'admin',
      filters: [filter('token', () => ({ allow: true, caller: ops }))],
      failClosed: false,
      audit,
      auditAllows: false,
    });
    expect((await authenticated.admit({ ...admin })).caller).toEqual(ops);
  });

  it('refuses a privileged route on a gate without TokenAuth, whatever the mode: nobody is authenticated', async () => {
    for (const failClosed of [true, false]) {
      const gate = new SecurityGate({
        name: 'admin',
        filters: [filter('acl', () => ({ allow: true }))],
        failClosed,
        audit: new Recorded(),
        auditAllows: false,
      });
      await expect(gate.admit(request({ action: 'admin', privileged: true }))).rejects.toMatchObject({
        code: ErrorCode.Unauthenticated,
        reason: 'missing',
      });
    }
  });

  it('carries the caller TokenAuth names to the later filters and to the audit', async () => {
    const audit = new Recorded();
    const seen: Caller[] = [];
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [
        filter('token', () => ({ allow: true, caller: ALICE })),
        filter('acl', (_, caller) => (seen.push(caller), { allow: true })),
      ],
      failClosed: true,
      audit,
      auditAllows: true,
    });
    expect((await gate.admit(request())).caller).toEqual(ALICE);
    expect(seen).toEqual([ALICE]);
    expect(audit.records[0]).toMatchObject({ decision: 'allow', principal: 'alice', tenant: 'acme', topic: 'orders' });
  });

  it('audits a refused but known caller as itself, and report-only proceeds as it', async () => {
    const audit = new Recorded();
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [filter('token', () => ({ ...deny('insufficient_scope', ErrorCode.Forbidden), caller: ALICE }))],
      failClosed: false,
      audit,
      auditAllows: false,
    });
    expect((await gate.admit(request())).caller).toEqual(ALICE);
    expect(audit.records[0]).toMatchObject({
      decision: 'deny',
      principal: 'alice',
      tenant: 'acme',
      reason: 'insufficient_scope',
    });
  });

  it('resolves a stored topic once, after TokenAuth, as the caller sees it', async () => {
    const asked: string[] = [];
    const topics: (string | undefined)[] = [];
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [
        filter('token', () => ({ allow: true, caller: ALICE })),
        filter('acl', (r) => (topics.push(r.topic), { allow: true })),
        filter('quota', (r) => (topics.push(r.topic), { allow: true })),
      ],
      failClosed: true,
      audit: new Recorded(),
      auditAllows: false,
    });
    await gate.admit(
      request({ topic: undefined, topicOf: async (caller) => (asked.push(caller.tenant), 'acme-orders') }),
    );
    expect(asked).toEqual(['acme']);
    expect(topics).toEqual(['acme-orders', 'acme-orders']);
  });

  it('releases what earlier filters hold when a later one refuses, and once only', async () => {
    let released = 0;
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [
        filter('quota', () => ({ allow: true, release: () => released++ })),
        filter('acl', () => deny('acl_deny', ErrorCode.Forbidden)),
      ],
      failClosed: true,
      audit: new Recorded(),
      auditAllows: false,
    });
    await expect(gate.admit(request())).rejects.toBeInstanceOf(GateRefusal);
    expect(released).toBe(1);
    const open = new SecurityGate({
      name: 'ingress',
      filters: [filter('quota', () => ({ allow: true, release: () => released++ }))],
      failClosed: true,
      audit: new Recorded(),
      auditAllows: false,
    });
    const admission = await open.admit(request());
    admission.release();
    admission.release();
    expect(released).toBe(2);
  });

  it("refunds what filters charged when a later one refuses, and on the admission's refund, once only", async () => {
    let refunded = 0;
    const charging = () => filter('quota', () => ({ allow: true, refund: () => refunded++ }));
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [charging(), filter('acl', () => deny('acl_deny', ErrorCode.Forbidden))],
      failClosed: true,
      audit: new Recorded(),
      auditAllows: false,
    });
    await expect(gate.admit(request())).rejects.toBeInstanceOf(GateRefusal);
    expect(refunded).toBe(1);
    const admission = await new SecurityGate({
      name: 'ingress',
      filters: [charging()],
      failClosed: true,
      audit: new Recorded(),
      auditAllows: false,
    }).admit(request());
    admission.release();
    expect(refunded).toBe(1);
    admission.refund();
    admission.refund();
    expect(refunded).toBe(2);
  });

  it('proceeds when the audit sink throws, and counts the failure', async () => {
    const gate = new SecurityGate({
      name: 'ingress',
      filters: [filter('token', () => ({ allow: true, caller: ALICE }))],
      failClosed: true,
      audit: {
        record: () => {
          throw new Error('disk full');
        },
      },
      auditAllows: true,
    });
    expect((await gate.admit(request())).caller).toEqual(ALICE);
    expect(gate.stats().auditFailures).toBe(1);
  });

  it('a filter that cannot decide fails the request fail-closed, and is counted and passed report-only', async () => {
    const broken = () => filter('acl', () => Promise.reject(new Error('postgres down')));
    const closed = new SecurityGate({
      name: 'ingress',
      filters: [broken()],
      failClosed: true,
      audit: new Recorded(),
      auditAllows: false,
    });
    await expect(closed.admit(request())).rejects.toThrow('postgres down');
    const reporting = new SecurityGate({
      name: 'ingress',
      filters: [broken()],
      failClosed: false,
      audit: new Recorded(),
      auditAllows: false,
    });
    await expect(reporting.admit(request())).resolves.toMatchObject({ caller: UNAUTHENTICATED });
    expect(reporting.stats().errors).toEqual({ acl: 1 });
  });
});

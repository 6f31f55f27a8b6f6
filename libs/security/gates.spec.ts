import { LoggingAuditSink } from './audit-sink';
import { loadConfig } from '@libs/config';
import { buildGates, describeGates } from './gates';
import { SecurityGate } from './security-gate';

const gate = (name: string, open: boolean) =>
  new SecurityGate({
    name,
    filters: open ? [] : [{ name: 'token', check: () => ({ allow: true }) }],
    failClosed: true,
    audit: new LoggingAuditSink(),
    auditAllows: false,
  });

describe('describeGates', () => {
  it.each(['127.0.0.1', '127.1.2.3', '::1', 'localhost'])(
    'says nothing more of an open gate on the loopback address %s',
    (host) => {
      expect(describeGates({ ingress: gate('ingress', true), admin: gate('admin', true) }, host)).toEqual({
        gate: 'open',
        admin: 'open',
        warnings: [],
      });
    },
  );

  it.each(['0.0.0.0', '10.1.2.3', '::'])('warns of each open gate on the non-loopback address %s', (host) => {
    const described = describeGates({ ingress: gate('ingress', true), admin: gate('admin', false) }, host);
    expect(described).toMatchObject({ gate: 'open', admin: 'enforcing' });
    expect(described.warnings).toEqual([expect.stringContaining('the request gate is open')]);
    expect(describeGates({ ingress: gate('ingress', true), admin: gate('admin', true) }, host).warnings).toHaveLength(
      2,
    );
  });

  it.each(['0.0.0.0', '10.1.2.3'])(
    'warns of a report-only gate on the non-loopback address %s exactly as of an open one',
    (host) => {
      const reportOnly = (name: string) =>
        new SecurityGate({
          name,
          filters: [{ name: 'token', check: () => ({ allow: true }) }],
          failClosed: false,
          audit: new LoggingAuditSink(),
          auditAllows: false,
        });
      const described = describeGates({ ingress: reportOnly('ingress'), admin: reportOnly('admin') }, host);
      expect(described).toMatchObject({ gate: 'report-only', admin: 'report-only' });
      expect(described.warnings).toEqual([
        expect.stringContaining('the request gate is report-only'),
        expect.stringContaining("the admin API's gate is report-only"),
      ]);
      expect(
        describeGates({ ingress: reportOnly('ingress'), admin: reportOnly('admin') }, '127.0.0.1').warnings,
      ).toEqual([]);
    },
  );
});

describe('buildGates: what each gate audits', () => {
  const allowAll = { name: 'token' as const, check: () => ({ allow: true as const }) };
  const request = {
    route: 'POST /events/publish',
    action: 'publish' as const,
    topic: 'orders',
    headers: {},
    remoteAddress: '127.0.0.1',
  };

  async function recordsOf(env: Record<string, string>): Promise<{ ingress: number; admin: number }> {
    const config = loadConfig({
      EVENTMESH_SECURITY_SECRETS_KEYS: `k:${Buffer.alloc(32).toString('base64')}`,
      EVENTMESH_SECURITY_GATE_FILTERS: 'token',
      EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
      ...env,
    });
    const records: string[] = [];
    const spy = jest.spyOn(LoggingAuditSink.prototype, 'record').mockImplementation((r) => void records.push(r.gate));
    try {
      const gates = buildGates(config, {
        db: undefined as never,
        producer: undefined as never,
        instanceId: 'i-1',
        filters: { token: allowAll },
      });
      for (let i = 0; i < 3; i++) {
        (await gates.ingress.admit({ ...request })).release();
        (await gates.admin.admit({ ...request, route: 'GET /admin/acl/rules', action: 'admin' })).release();
      }
    } finally {
      spy.mockRestore();
    }
    return {
      ingress: records.filter((g) => g === 'ingress').length,
      admin: records.filter((g) => g === 'admin').length,
    };
  }

  it("by default: every admin decision, and none of the ingress gate's allowed requests", async () => {
    expect(await recordsOf({})).toEqual({ ingress: 0, admin: 3 });
  });

  it('with EVENTMESH_SECURITY_GATE_AUDIT_RECORD=ALL: every decision of both', async () => {
    expect(await recordsOf({ EVENTMESH_SECURITY_GATE_AUDIT_RECORD: 'ALL' })).toEqual({ ingress: 3, admin: 3 });
  });
});

import { LoggingAuditSink } from './audit-sink';
import { describeGates } from './gates';
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
  it.each(['127.0.0.1', '127.1.2.3', '::1', 'localhost'])('says nothing more of an open gate on the loopback address %s', (host) => {
    expect(describeGates({ ingress: gate('ingress', true), admin: gate('admin', true) }, host)).toEqual({ gate: 'open', admin: 'open', warnings: [] });
  });

  it.each(['0.0.0.0', '10.1.2.3', '::'])('warns of each open gate on the non-loopback address %s', (host) => {
    const described = describeGates({ ingress: gate('ingress', true), admin: gate('admin', false) }, host);
    expect(described).toMatchObject({ gate: 'open', admin: 'enforcing' });
    expect(described.warnings).toEqual([expect.stringContaining('the request gate is open')]);
    expect(describeGates({ ingress: gate('ingress', true), admin: gate('admin', true) }, host).warnings).toHaveLength(2);
  });
});

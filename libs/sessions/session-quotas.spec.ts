import { ErrorCode, EventMeshError } from '@libs/errors';
import { SessionQuotas } from './session-quotas';

const quotaOf = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(EventMeshError);
    expect((e as EventMeshError).code).toBe(ErrorCode.QuotaExceeded);
    return (e as EventMeshError).details.quota;
  }
  return undefined;
};

describe('SessionQuotas', () => {
  const quotas = () => new SessionQuotas({ maxPerTenant: 2, maxAgentsPerTenant: 1, maxBytesInFlightPerTenant: 1000 });

  it('caps the sessions of a tenant, not of another, and gives a place back once per release', () => {
    const q = quotas();
    const first = q.openSession('t1', 100);
    q.openSession('t1', 100);
    expect(quotaOf(() => q.openSession('t1', 100))).toBe('sessions');
    q.openSession('t2', 100);
    first();
    first();
    q.openSession('t1', 100);
    expect(quotaOf(() => q.openSession('t1', 100))).toBe('sessions');
  });

  it('charges bytes in flight as the windows of the open sessions', () => {
    const q = quotas();
    const big = q.openSession('t1', 900);
    expect(quotaOf(() => q.openSession('t1', 200))).toBe('session_bytes_in_flight');
    big();
    q.openSession('t1', 1000);
    expect(q.of('t1')).toEqual({ sessions: 1, agents: 0, bytes: 1000 });
  });

  it('caps the agent replicas of a tenant', () => {
    const q = quotas();
    const release = q.serveAgent('t1');
    expect(quotaOf(() => q.serveAgent('t1'))).toBe('session_agents');
    release();
    q.serveAgent('t1');
  });

  it("counts the other processes' usage of a tenant, as their last rows say, against its caps", () => {
    const q = quotas();
    const peer = { holder: 'i2/1', instanceId: 'i2' };
    q.setPeers([
      { ...peer, tenant: 't1', sessions: 1, agents: 1, bytes: 100 },
      { ...peer, tenant: 't2', sessions: 0, agents: 0, bytes: 950 },
    ]);
    q.openSession('t1', 100);
    expect(quotaOf(() => q.openSession('t1', 100))).toBe('sessions');
    expect(quotaOf(() => q.serveAgent('t1'))).toBe('session_agents');
    expect(quotaOf(() => q.openSession('t2', 100))).toBe('session_bytes_in_flight');
    expect(q.view('t1')).toEqual([
      {
        tenant: 't1',
        sessions: 2,
        agents: 1,
        bytes: 200,
        here: { sessions: 1, agents: 0, bytes: 100 },
        others: [{ holder: 'i2/1', instance: 'i2', sessions: 1, agents: 1, bytes: 100 }],
      },
    ]);
    q.setPeers([]);
    q.openSession('t1', 100);
    q.serveAgent('t1');
  });

  it('tells its listener of each charge and release, to write its rows at once', () => {
    const q = quotas();
    let changes = 0;
    q.onChange(() => changes++);
    const release = q.openSession('t1', 100);
    release();
    release();
    q.serveAgent('t1');
    expect(changes).toBe(3);
    expect(q.local()).toEqual([{ tenant: 't1', sessions: 0, agents: 1, bytes: 0 }]);
  });
});

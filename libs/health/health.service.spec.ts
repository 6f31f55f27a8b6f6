import { loadConfig } from '@libs/config';
import type { Dependencies } from '@libs/runtime/dependencies';
import { HealthService } from './health.service';

/**
 * The probes' contract with the backends, on fakes that count what they are asked (the real servers' side is
 * test/integration/health.spec.ts): liveness asks nothing; readiness and /health share one round of checks per
 * EVENTMESH_HEALTH_CHECK_CACHE_MS; a stalled dispatch loop or a dependency down makes readiness fail.
 */
describe('HealthService', () => {
  const calls = { postgres: 0, kafka: 0, temporal: 0 };
  let postgresUp = true;
  const deps = {
    db: {
      query: () => (
        calls.postgres++,
        postgresUp ? Promise.resolve([{ '?column?': 1 }]) : Promise.reject(new Error('connection refused'))
      ),
    },
    topics: { describeCluster: () => (calls.kafka++, Promise.resolve({ brokers: [{ nodeId: 1 }] })) },
    temporal: {
      connection: {
        withDeadline: (_: number, f: () => Promise<unknown>) => f(),
        healthService: { check: () => (calls.temporal++, Promise.resolve({ status: 1 })) },
      },
    },
  } as unknown as Dependencies;
  const config = (env: Record<string, string> = {}) => loadConfig({ EVENTMESH_INSTANCE_ID: 'h1', ...env });

  beforeEach(() => {
    calls.postgres = calls.kafka = calls.temporal = 0;
    postgresUp = true;
  });

  it('answers liveness without asking any backend', () => {
    const health = new HealthService(deps, config());
    for (let i = 0; i < 5; i++) expect(health.live()).toMatchObject({ status: 'up', instance: 'h1', pid: process.pid });
    expect(calls).toEqual({ postgres: 0, kafka: 0, temporal: 0 });
  });

  it('checks each backend once for many readiness and detail calls within the cache period', async () => {
    const health = new HealthService(deps, config({ EVENTMESH_HEALTH_CHECK_CACHE_MS: '60000' }));
    const answers = await Promise.all([...Array.from({ length: 10 }, () => health.ready()), health.check()]);
    for (let i = 0; i < 10; i++) await health.ready();
    expect(calls).toEqual({ postgres: 1, kafka: 1, temporal: 1 });
    expect(new Set(answers.slice(0, 10).map((a) => (a as { checkedAt: string }).checkedAt)).size).toBe(1);
  });

  it('is not ready while a dependency is down, and says which', async () => {
    postgresUp = false;
    const ready = await new HealthService(deps, config({ EVENTMESH_HEALTH_CHECK_CACHE_MS: '0' })).ready();
    expect(ready.status).toBe('down');
    expect(ready.dependencies.postgres).toMatchObject({
      status: 'down',
      error: expect.stringContaining('connection refused') as string,
    });
    expect(ready.dependencies.kafka.status).toBe('up');
  });

  it('is not ready while a running dispatch loop has not completed a round within the stale limit', async () => {
    const loops = [{ lastRoundAt: Date.now() }, { lastRoundAt: Date.now() - 45_000 }];
    const health = new HealthService(deps, config({ EVENTMESH_HEALTH_DISPATCH_STALE_MS: '30000' }), {
      loops: { values: () => loops },
    });
    const stalled = await health.ready();
    expect(stalled.status).toBe('down');
    expect(stalled.delivery).toMatchObject({ status: 'stalled', loops: 2, staleAfterMs: 30000 });
    expect(stalled.delivery.lastRoundAgeMs).toBeGreaterThanOrEqual(45_000);
    loops[1].lastRoundAt = Date.now();
    expect((await health.ready()).delivery).toMatchObject({ status: 'up', loops: 2 });
    expect((await health.ready()).status).toBe('up');
  });

  it('is ready with no loop running (no worker, dispatch paused, or no partition owned), and says there is none', async () => {
    const ready = await new HealthService(deps, config(), { loops: { values: () => [] } }).ready();
    expect(ready).toMatchObject({ status: 'up', delivery: { status: 'up', loops: 0 } });
  });
});

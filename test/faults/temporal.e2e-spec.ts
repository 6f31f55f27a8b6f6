import { FaultRun } from './fault-run';
import { reportCase } from './report';
import { waitFor } from '../support/wait-for';

/**
 * Temporal unreachable under load (docs/failure-matrix.md): the link between the instance and the Temporal
 * frontend is cut for longer than the dispatch activity's heartbeat timeout, then healed. Publishing does not
 * need Temporal; delivery may pause or be redone, and nothing acknowledged is lost.
 */
describe('faults: Temporal', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('cut past the heartbeat timeout, then healed: nothing acknowledged is lost', async () => {
    run = new FaultRun({
      name: 'temporal-cut',
      instances: [{ proxyTemporal: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'long-poll' }],
      publishers: 4,
      ratePerSecond: 100,
      attemptTimeoutMs: 5000,
      env: { EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000' },
    });
    await run.start();
    await run.acknowledgedMore(100);
    const proxy = run.instances[0].temporal!;
    proxy.cut();
    const cutAt = Date.now();
    await run.acknowledgedMore(200, 30000);
    await waitFor('10 s of cut (2.5 heartbeat timeouts)', () => Date.now() - cutAt >= 10000, { timeoutMs: 20000 });
    proxy.heal();
    await run.acknowledgedMore(100, 30000);
    const result = await run.finish(60000);
    reportCase('Temporal link cut 10 s (TTL 4 s, proxy); 1 instance, 100/s', result);
    expect(result.lost).toBe(0);
    expect(result.drained).toBe(true);
  }, 180000);
});

import { CI_LOAD, FaultRun } from './fault-run';
import { expectNothingLost } from './expect-run';
import { reportCase } from './report';

/**
 * Instance faults under load (docs/failure-matrix.md): the instance that dispatches the subscriptions is killed
 * (SIGKILL) mid-delivery and restarted under its id, or stopped (SIGSTOP) past its heartbeat timeout and resumed
 * (SIGCONT). Another instance takes the publishes meanwhile. Nothing acknowledged is lost; what was delivered
 * but not committed comes again (duplicates, counted).
 */
describe('faults: instance process', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('SIGKILL mid-delivery and restart: nothing acknowledged is lost', async () => {
    run = new FaultRun({
      name: 'kill',
      instances: [{}, {}],
      subscribers: [
        { transport: 'webhook', on: 0 },
        { transport: 'websocket', on: 0 },
        { transport: 'webhook', on: 1 },
      ],
      ...CI_LOAD,
      publishTo: [1],
    });
    await run.start();
    await run.acknowledgedMore(200);
    await run.instances[0].kill();
    await run.acknowledgedMore(100);
    await run.instances[0].restart();
    await run.acknowledgedMore(100, 30000);
    const result = await run.finish(60000);
    reportCase('instance SIGKILL mid-delivery + restart; 2 instances, 100/s', result);
    expectNothingLost(result);
  }, 180000);

  it('SIGSTOP past the heartbeat timeout, then SIGCONT: nothing acknowledged is lost', async () => {
    run = new FaultRun({
      name: 'pause',
      instances: [{}, {}],
      subscribers: [
        { transport: 'webhook', on: 0 },
        { transport: 'sse', on: 0 },
      ],
      ...CI_LOAD,
      publishTo: [1],
      env: { EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000' },
    });
    await run.start();
    await run.acknowledgedMore(200);
    run.instances[0].pause();
    // 8 s of publishing at 100/s while it is stopped: twice its heartbeat timeout.
    await run.acknowledgedMore(800, 30000);
    run.instances[0].resume();
    await run.acknowledgedMore(100, 30000);
    const result = await run.finish(60000);
    reportCase('instance SIGSTOP ~8 s (TTL 4 s) + SIGCONT; 2 instances, 100/s', result);
    expectNothingLost(result, { order: false });
  }, 180000);
});

import { randomUUID } from 'node:crypto';
import type { Worker } from '@temporalio/worker';
import { WorkerHost } from '../../apps/worker/src/worker-host';
import { dispatchWorkflowIdOf } from '../../libs/temporal';
import { closeDependencies, connectDependencies, Dependencies } from '../../libs/runtime';
import { StreamHub } from '../../libs/streams';
import { testConfig } from '../support/env';
import { terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * The instance's Temporal worker host on the real servers: a worker that stops while the instance runs is
 * fatal, never silent (an instance that takes events and delivers none, with a healthy /health, is the worst
 * failure an operator can be handed), and a signal is the process entry's to handle, not the SDK's.
 */
describe('WorkerHost (real Temporal, Postgres, Kafka)', () => {
  const instanceId = `worker-host-${randomUUID().slice(0, 8)}`;
  const config = testConfig({ EVENTMESH_INSTANCE_ID: instanceId });
  let deps: Dependencies;
  let host: WorkerHost | undefined;
  const fatal: string[] = [];

  beforeAll(async () => {
    deps = await connectDependencies(config, 'worker-host-spec');
    host = await WorkerHost.start(config, deps, (reason) => fatal.push(reason), new StreamHub(0));
  });

  afterAll(async () => {
    await host?.stop();
    await terminateWorkflows(deps.temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await closeDependencies(deps);
  });

  it('leaves signals to the process: a SIGUSR2 (one of the SDK\'s default shutdown signals) stops no worker', async () => {
    const workers = (host as unknown as { workers: Worker[] }).workers;
    expect(workers.map((w) => w.getState())).toEqual(['RUNNING']);
    // The process must not die of the signal during the test: a listener of our own takes it.
    const keep = () => undefined;
    process.on('SIGUSR2', keep);
    try {
      process.kill(process.pid, 'SIGUSR2');
      // Signal handlers run on the event loop; give the SDK's (if any) every chance to act.
      await waitFor('the signal to be handled', () => new Promise<boolean>((resolve) => setImmediate(() => resolve(true))));
      await expect(waitFor('a worker to leave RUNNING', () => workers.some((w) => w.getState() !== 'RUNNING'), { timeoutMs: 2000 })).rejects.toThrow(
        'timed out',
      );
    } finally {
      process.off('SIGUSR2', keep);
    }
    expect(fatal).toEqual([]);
  });

  it('reports a worker that stopped while the instance runs as fatal', async () => {
    const workers = (host as unknown as { workers: Worker[] }).workers;
    workers[0].shutdown();
    const reasons = await waitFor('the instance to hear that its worker stopped', () => fatal.length > 0 && [...fatal]);
    expect(reasons[0]).toMatch(/Temporal worker .* stopped by itself/);
  });
});

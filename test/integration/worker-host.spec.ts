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
 * failure an operator can be handed).
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

  it('reports a worker that stopped while the instance runs as fatal', async () => {
    const workers = (host as unknown as { workers: Worker[] }).workers;
    workers[0].shutdown();
    const reasons = await waitFor('the instance to hear that its worker stopped', () => fatal.length > 0 && [...fatal]);
    expect(reasons[0]).toMatch(/Temporal worker .* stopped by itself/);
  });
});

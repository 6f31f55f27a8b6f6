import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { A2ATaskActivities } from '../../contracts';
import {
  a2aSearchAttributes,
  a2aTaskWorkflowV2,
  a2aTaskWorkflowIdOf,
  taskChangedSignal,
  taskStateQuery,
  TaskStateName,
} from '../../workflows';
import { testConfig } from '../support/env';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * The A2A task workflow on the real Temporal server with stand-in activities (no agent, no Kafka, no Postgres): what
 * it makes of the `changed` signals a delivery sends while it follows the agent's task.
 */
describe('A2A task workflow (real Temporal, stand-in activities)', () => {
  const config = testConfig();
  const taskQueue = `a2a-task-spec-${randomUUID().slice(0, 6)}`;
  let temporal: { client: Client; close(): Promise<void> };
  let connection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  const started: string[] = [];

  /** The pushes the workflow asked for, each held until the test lets it end. */
  const pushes: { taskId: string; done: () => void }[] = [];
  const standIns: Pick<A2ATaskActivities, 'deliverTask' | 'pushTask' | 'cancelTask' | 'failTask'> = {
    async deliverTask() {
      return { state: 'completed' };
    },
    async pushTask(ids) {
      await new Promise<void>((done) => pushes.push({ taskId: ids.taskId, done }));
      return { delivered: 1, givenUp: 0, gone: 0 };
    },
    async cancelTask() {
      return { outcome: 'not-cancelable', state: 'completed' };
    },
    async failTask() {
      return { state: 'failed' };
    },
  };

  beforeAll(async () => {
    temporal = await temporalClient();
    connection = await NativeConnection.connect({ address: config.temporal.address });
    worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue,
      workflowsPath: require.resolve('../../workflows'),
      activities: standIns,
    });
    running = worker.run();
  });
  afterAll(async () => {
    for (const push of pushes) push.done();
    await terminateWorkflows(temporal.client, started);
    worker?.shutdown();
    await running;
    await connection?.close();
    await temporal?.close();
  });

  it('keeps a settled state when a change of the running task is signalled after it (a late signal of a delivery)', async () => {
    const taskId = randomUUID();
    const workflowId = a2aTaskWorkflowIdOf(taskId);
    started.push(workflowId);
    const handle = await temporal.client.workflow.start(a2aTaskWorkflowV2, {
      workflowId,
      taskQueue,
      args: [
        { taskId, tenant: 'spec', agent: 'echo', style: 'url', timeoutMs: 60_000, callTimeoutMs: 5000, push: true },
      ],
    });
    // The first attempt answered `completed`; the workflow pushes it, and is held there, still running.
    const push = await waitFor("the completion's push", () => pushes.find((p) => p.taskId === taskId));
    await expect(handle.query(taskStateQuery)).resolves.toBe('completed');
    // A delivery's signal of a change before the completion, arriving after it.
    await handle.signal(taskChangedSignal, { state: 'working', version: 7 });
    // A query after the signal was accepted sees it handled (Temporal answers queries after the events before them).
    await expect(handle.query(taskStateQuery)).resolves.toBe('completed');
    push.done();
    await expect(handle.result()).resolves.toBe<TaskStateName>('completed');
    expect((await handle.describe()).typedSearchAttributes.get(a2aSearchAttributes.state)).toBe('completed');
    // The check is a patch: runs recorded before it replay without it.
    const history = await handle.fetchHistory();
    expect(history.events?.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch')).toHaveLength(1);
  });
});

import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { DispatchActivities, DispatchRunInput, DispatchRunResult } from '../../contracts';
import { newProgress } from '@libs/delivery';
import { dispatchStatusQuery, instanceDispatchWorkflow, pauseDispatchSignal } from '../../workflows';
import { testConfig } from '../support/env';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * The dispatch workflow on the real Temporal server, with a stand-in activity: it keeps the activity running,
 * adds up what the runs report, continues as new on schedule, and answers its query and signal.
 * Its first, continued-as-new execution is the kind of history scripts/record-workflow-history.sh saves for the
 * replay test.
 */
describe('instanceDispatchWorkflow (real Temporal)', () => {
  const config = testConfig();
  const taskQueue = `dispatch-spec-${randomUUID().slice(0, 8)}`;
  const workflowId = `dispatch/${taskQueue}`;
  let temporal: { client: Client; close(): Promise<void> };
  let connection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  const calls: DispatchRunInput[] = [];

  beforeAll(async () => {
    temporal = await temporalClient();
    connection = await NativeConnection.connect({ address: config.temporal.address });
    const activities: DispatchActivities = {
      async pollAndDispatch(input: DispatchRunInput): Promise<DispatchRunResult> {
        calls.push(input);
        return {
          ...newProgress(),
          rounds: 3,
          delivered: 2,
          failedAttempts: 1,
          subscriptions: 1,
          partitions: 2,
          stoppedBy: 'deadline',
        };
      },
    };
    worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue,
      activities,
      workflowsPath: require.resolve('../../workflows'),
    });
    running = worker.run();
  });

  afterAll(async () => {
    await terminateWorkflows(temporal.client, [workflowId]);
    worker.shutdown();
    await running;
    await connection.close();
    await temporal.close();
  });

  it('runs the activity again and again, sums the runs, and continues as new every runsPerExecution runs', async () => {
    const handle = await temporal.client.workflow.start(instanceDispatchWorkflow, {
      workflowId,
      taskQueue,
      args: [{ instanceId: taskQueue, leaseTtlMs: 5000, runMs: 1000, runsPerExecution: 3 }],
    });
    const firstRunId = handle.firstExecutionRunId;

    const status = await waitFor('seven runs', async () => {
      const s = await temporal.client.workflow.getHandle(workflowId).query(dispatchStatusQuery);
      return s.totals.runs >= 7 ? s : undefined;
    });
    expect(status.instanceId).toBe(taskQueue);
    expect(status.totals.delivered).toBe(status.totals.runs * 2);
    expect(status.totals.failedAttempts).toBe(status.totals.runs);
    expect(calls[0]).toEqual({ instanceId: taskQueue, runMs: 1000 });

    const first = temporal.client.workflow.getHandle(workflowId, firstRunId);
    const firstDescription = await first.describe();
    expect(firstDescription.status.name).toBe('CONTINUED_AS_NEW');
    const history = await first.fetchHistory();
    const scheduled = history.events!.filter((e) => e.activityTaskScheduledEventAttributes);
    expect(scheduled).toHaveLength(3);
    // Events never pass through workflow history: the activity input is the instance id and a duration.
    for (const e of scheduled) {
      const payload = e.activityTaskScheduledEventAttributes!.input!.payloads![0].data!;
      expect(Object.keys(JSON.parse(Buffer.from(payload).toString()))).toEqual(['instanceId', 'runMs']);
    }
  });

  it('pauses after the current run on the pause signal and reports it', async () => {
    const handle = temporal.client.workflow.getHandle(workflowId);
    await handle.signal(pauseDispatchSignal, true);
    const status = await waitFor('the paused status', async () => {
      const s = await handle.query(dispatchStatusQuery);
      return s.paused ? s : undefined;
    });
    const runsWhenPaused = status.totals.runs;
    const callsWhenPaused = calls.length;
    await handle.signal(pauseDispatchSignal, false);
    await waitFor(
      'runs to resume',
      async () => (await handle.query(dispatchStatusQuery)).totals.runs > runsWhenPaused + 1,
    );
    expect(calls.length).toBeGreaterThan(callsWhenPaused);
  });
});

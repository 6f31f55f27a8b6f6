import { condition, continueAsNew, proxyActivities, setHandler } from '@temporalio/workflow';
import {
  DispatchActivities,
  DispatchRunResult,
  DispatchTotals,
  dispatchStatusQuery,
  InstanceDispatchInput,
  pauseDispatchSignal,
} from '../contracts';

/**
 * One per runtime instance in LOCAL_STICKY_PULL, id `dispatch/<instanceId>`, on the instance's own task queue.
 * It keeps the instance's poll-and-dispatch activity running: the activity heartbeats (its heartbeat timeout is
 * the lease TTL), returns after `runMs`, and is started again; a crashed or silent run is retried on the same
 * queue. Events never pass through here: the activity reports counts and the workflow keeps totals. The
 * workflow continues as new every `runsPerExecution` runs so its history stays small.
 */
export async function instanceDispatchWorkflow(input: InstanceDispatchInput): Promise<void> {
  const { pollAndDispatch } = proxyActivities<DispatchActivities>({
    startToCloseTimeout: input.runMs + 4 * input.leaseTtlMs,
    heartbeatTimeout: input.leaseTtlMs,
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s' },
  });
  const totals: DispatchTotals = input.totals ?? { runs: 0, delivered: 0, failedAttempts: 0 };
  let paused = input.paused ?? false;
  let lastRun: DispatchRunResult | undefined;
  setHandler(dispatchStatusQuery, () => ({ instanceId: input.instanceId, paused, totals, lastRun }));
  setHandler(pauseDispatchSignal, (value) => {
    paused = value;
  });

  const runsPerExecution = input.runsPerExecution ?? 50;
  for (let i = 0; i < runsPerExecution; i++) {
    await condition(() => !paused);
    lastRun = await pollAndDispatch({ instanceId: input.instanceId, runMs: input.runMs });
    totals.runs++;
    totals.delivered += lastRun.delivered;
    totals.failedAttempts += lastRun.failedAttempts;
  }
  await continueAsNew<typeof instanceDispatchWorkflow>({ ...input, totals, paused });
}

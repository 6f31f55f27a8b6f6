import { condition, continueAsNew, defineQuery, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type { DispatchActivities, DispatchRunResult } from '../activities';

/**
 * One per runtime instance in LOCAL_STICKY_PULL, id `dispatch/<instanceId>`, on the instance's own task queue.
 * It keeps the instance's poll-and-dispatch activity running: the activity heartbeats (its heartbeat timeout is
 * the lease TTL), returns after `runMs`, and is started again; a crashed or silent run is retried on the same
 * queue. Events never pass through here: the activity reports counts and the workflow keeps totals. The
 * workflow continues as new every `runsPerExecution` runs so its history stays small.
 */
export interface InstanceDispatchInput {
  instanceId: string;
  leaseTtlMs: number;
  /** How long one activity run lasts before it returns and is started again. */
  runMs: number;
  runsPerExecution?: number;
  /** Carried across continue-as-new, so a pause survives it. */
  totals?: DispatchTotals;
  paused?: boolean;
}

export interface DispatchTotals {
  runs: number;
  delivered: number;
  failedAttempts: number;
}

export interface InstanceDispatchStatus {
  instanceId: string;
  paused: boolean;
  totals: DispatchTotals;
  lastRun?: DispatchRunResult;
}

export const dispatchStatusQuery = defineQuery<InstanceDispatchStatus>('status');
/** Operator control: stop dispatching after the current run (true) or resume (false). */
export const pauseDispatchSignal = defineSignal<[boolean]>('pause');

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

import {
  CancellationScope,
  condition,
  continueAsNew,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import {
  ConnectorJobActivities,
  ConnectorJobInput,
  ConnectorRunResult,
  connectorJobSearchAttributes,
  jobStatusQuery,
  pauseJobSignal,
  restartJobSignal,
} from '../contracts';

/**
 * One per connector job, id `connector-job/<jobId>`, on the connector replicas' queue. It keeps the job's run
 * activity running: the activity claims the job's next epoch, runs the connector's loop heartbeating its position,
 * returns after `runMs`, and is started again; a replica that dies or stops is found out by the heartbeat timeout
 * and the run is retried on another replica (which claims a newer epoch, fencing the old one's writes). Pause
 * (signal, from `/admin/jobs` or the Temporal UI) cancels the run and waits; restart cancels it and runs again.
 * Records never pass through here.
 */
export async function connectorJobWorkflow(input: ConnectorJobInput): Promise<void> {
  const { runConnectorJob } = proxyActivities<ConnectorJobActivities>({
    startToCloseTimeout: input.runMs + 6 * input.heartbeatMs,
    heartbeatTimeout: input.heartbeatMs,
    cancellationType: 'WAIT_CANCELLATION_COMPLETED',
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s' },
  });
  const { recordJobState } = proxyActivities<ConnectorJobActivities>({ startToCloseTimeout: '30s' });
  let paused = input.paused ?? false;
  let runs = 0;
  let lastRun: ConnectorRunResult | undefined;
  let current: CancellationScope | undefined;
  setHandler(jobStatusQuery, () => ({ jobId: input.jobId, paused, runs, lastRun }));
  setHandler(pauseJobSignal, (value) => {
    paused = value;
    if (value) current?.cancel();
  });
  setHandler(restartJobSignal, () => current?.cancel());

  const stateNow = async () => {
    const state = paused ? 'PAUSED' : 'RUNNING';
    upsertSearchAttributes({ [connectorJobSearchAttributes.state.name]: [state] });
    await recordJobState({ jobId: input.jobId, state });
  };
  await stateNow();
  const runsPerExecution = input.runsPerExecution ?? 100;
  while (runs < runsPerExecution) {
    if (paused) {
      await stateNow();
      await condition(() => !paused);
      await stateNow();
    }
    current = new CancellationScope();
    try {
      lastRun = await current.run(() => runConnectorJob({ jobId: input.jobId, runMs: input.runMs }));
    } catch (e) {
      if (!isCancellation(e)) throw e;
    } finally {
      current = undefined;
    }
    runs++;
    if (lastRun?.stoppedBy === 'job-gone') return;
  }
  await continueAsNew<typeof connectorJobWorkflow>({ ...input, paused });
}

import { temporalClient } from './temporal';

/**
 * After every suite that runs against the real servers (jest.config.js, `setupFilesAfterEnv`): the A2A task
 * workflows and instance dispatch workflows it left running in the test namespace are terminated. Suites share
 * one namespace and the one `eventmesh-a2a` task queue, so a task workflow a suite left running (a task whose
 * agent never answered, a deadline still ahead) would otherwise be run by the next suite's worker: its activities
 * would write to that suite's Kafka and show in its metrics. A suite's own instances are closed by its own
 * `afterAll`, which runs before this one.
 */
const LEFTOVERS = `ExecutionStatus = 'Running' AND WorkflowType IN ('a2aTaskWorkflow', 'a2aTaskWorkflowV2', 'instanceDispatchWorkflow')`;
/** The whole clean-up, connecting included; past it the suite goes on (the hook's own limit is a little longer). */
const DEADLINE_MS = 15000;

async function endLeftovers(deadline: AbortSignal): Promise<void> {
  const temporal = await temporalClient();
  try {
    const ids: string[] = [];
    for await (const run of temporal.client.workflow.list({ query: LEFTOVERS })) {
      if (deadline.aborted) break;
      ids.push(run.workflowId);
    }
    await Promise.all(
      ids.map((id) =>
        temporal.client.workflow
          .getHandle(id)
          .terminate('suite finished')
          .catch(() => undefined),
      ),
    );
  } finally {
    await temporal.close();
  }
}

afterAll(async () => {
  const deadline = AbortSignal.timeout(DEADLINE_MS);
  const late = new Promise<never>((_, reject) =>
    deadline.addEventListener('abort', () => reject(new Error(`not done within ${DEADLINE_MS} ms`)), { once: true }),
  );
  try {
    await Promise.race([endLeftovers(deadline), late]);
  } catch (e) {
    // The servers may be down at the end of a fault suite that failed; the suite's own result says why.
    process.stderr.write(`[suite-cleanup] leftover workflows not ended: ${(e as Error).message}\n`);
  }
}, DEADLINE_MS + 5000);

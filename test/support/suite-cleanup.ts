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
const DEADLINE_MS = 15000;

afterAll(async () => {
  const deadline = AbortSignal.timeout(DEADLINE_MS);
  let temporal: Awaited<ReturnType<typeof temporalClient>> | undefined;
  try {
    temporal = await temporalClient();
    const ids: string[] = [];
    for await (const run of temporal!.client.workflow.list({ query: LEFTOVERS })) {
      ids.push(run.workflowId);
      if (deadline.aborted) break;
    }
    await Promise.all(ids.map((id) => temporal!.client.workflow.getHandle(id).terminate('suite finished').catch(() => undefined)));
  } catch (e) {
    // The servers may be down at the end of a fault suite that failed; the suite's own result says why.
    process.stderr.write(`[suite-cleanup] leftover workflows not ended: ${(e as Error).message}\n`);
  } finally {
    await temporal?.close();
  }
}, DEADLINE_MS + 5000);

import { proxyActivities } from '@temporalio/workflow';
import type { A2ATaskActivities } from '../contracts';

export interface A2ATaskRetentionInput {
  /** Tasks that ended longer ago than this many days go (EVENTMESH_AGENTS_TASK_RETENTION_DAYS of the instance that wrote the schedule). */
  retentionDays: number;
}

/**
 * One run of the A2A task retention: started by the Temporal schedule `a2a-task-retention` (every ten minutes, one
 * at a time), it runs the purge activity on any instance's worker and returns how many tasks it deleted (the
 * Temporal UI shows it as the run's result). A failed purge is retried a few times; the next run tries again.
 */
export async function a2aTaskRetentionWorkflow(input: A2ATaskRetentionInput): Promise<{ deleted: number }> {
  const { purgeExpiredTasks } = proxyActivities<A2ATaskActivities>({
    startToCloseTimeout: '5m',
    retry: { initialInterval: '5s', backoffCoefficient: 2, maximumAttempts: 3 },
  });
  return { deleted: await purgeExpiredTasks(input) };
}

import { proxyActivities } from '@temporalio/workflow';
import type { DeadLetterActivities } from '../contracts';

export interface DlqRetentionInput {
  /** Dead letters older than this many days go (EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS of the instance that wrote the schedule). */
  retentionDays: number;
}

/**
 * One run of the dead-letter retention: started by the Temporal schedule `dlq-retention` (every ten minutes, one
 * at a time), it runs the purge activity on any instance's worker and returns how many letters it deleted (the
 * Temporal UI shows it as the run's result). A failed purge is retried a few times; the next run tries again.
 */
export async function dlqRetentionWorkflow(input: DlqRetentionInput): Promise<{ deleted: number }> {
  const { purgeExpiredDeadLetters } = proxyActivities<DeadLetterActivities>({
    startToCloseTimeout: '5m',
    retry: { initialInterval: '5s', backoffCoefficient: 2, maximumAttempts: 3 },
  });
  return { deleted: await purgeExpiredDeadLetters(input) };
}

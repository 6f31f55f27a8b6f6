import { Client, ScheduleAlreadyRunning, ScheduleNotFoundError } from '@temporalio/client';
import { DEAD_LETTER_TASK_QUEUE, DLQ_RETENTION_SCHEDULE_ID } from '../../../libs/temporal';
import { dlqRetentionWorkflow } from '../../../workflows';

/** How often the retention purge runs. */
export const DLQ_RETENTION_EVERY = '10m' as const;

/**
 * Writes the Temporal schedule `dlq-retention`: every ten minutes one `dlqRetentionWorkflow` run on the
 * dead-letter task queue, never two at once (overlap SKIP), with this instance's retention. Idempotent and safe
 * for instances booting together: it is created, or, when it exists, updated to this definition (the last
 * instance to boot sets the retention). Retention 0 (keep dead letters) deletes the schedule.
 */
export async function ensureRetentionSchedule(
  client: Client,
  retentionDays: number,
): Promise<{ scheduleId: string; action: 'created' | 'updated' | 'deleted' | 'absent' }> {
  const scheduleId = DLQ_RETENTION_SCHEDULE_ID;
  const handle = client.schedule.getHandle(scheduleId);
  if (retentionDays === 0) {
    try {
      await handle.delete();
      return { scheduleId, action: 'deleted' };
    } catch (e) {
      if (e instanceof ScheduleNotFoundError) return { scheduleId, action: 'absent' };
      throw e;
    }
  }
  const definition = {
    spec: { intervals: [{ every: DLQ_RETENTION_EVERY }] },
    action: {
      type: 'startWorkflow' as const,
      workflowType: dlqRetentionWorkflow,
      workflowId: 'dlq-retention-run',
      taskQueue: DEAD_LETTER_TASK_QUEUE,
      // A run no worker picks up (no instance running) ends instead of holding back the next ones (overlap SKIP).
      workflowExecutionTimeout: '30m' as const,
      args: [{ retentionDays }] as [{ retentionDays: number }],
    },
    policies: { overlap: 'SKIP' as const, catchupWindow: DLQ_RETENTION_EVERY },
  };
  try {
    await client.schedule.create({ scheduleId, ...definition });
    return { scheduleId, action: 'created' };
  } catch (e) {
    if (!(e instanceof ScheduleAlreadyRunning)) throw e;
  }
  await handle.update((previous) => ({ ...previous, ...definition, state: previous.state }));
  return { scheduleId, action: 'updated' };
}

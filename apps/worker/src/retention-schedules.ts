import { Client, ScheduleAlreadyRunning, ScheduleNotFoundError } from '@temporalio/client';
import { A2A_TASK_RETENTION_SCHEDULE_ID, DEAD_LETTER_TASK_QUEUE, DLQ_RETENTION_SCHEDULE_ID } from '@libs/temporal';
import { A2A_TASK_QUEUE, A2A_TASK_RETENTION_WORKFLOW, DLQ_RETENTION_WORKFLOW } from '../../../contracts';

/** How often a retention purge runs. */
export const RETENTION_EVERY = '10m' as const;

/** One retention's schedule: its id, the workflow each run is, and the task queue it runs on. */
export interface RetentionSchedule {
  scheduleId: string;
  /** The workflow's name (contracts/: each a `RetentionWorkflow`). */
  workflowType: typeof DLQ_RETENTION_WORKFLOW | typeof A2A_TASK_RETENTION_WORKFLOW;
  /** The id of each run (one at a time). */
  workflowId: string;
  taskQueue: string;
}

/** The dead letters' retention (the delivery's and the A2A pushes'), EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS. */
export const DLQ_RETENTION: RetentionSchedule = {
  scheduleId: DLQ_RETENTION_SCHEDULE_ID,
  workflowType: DLQ_RETENTION_WORKFLOW,
  workflowId: 'dlq-retention-run',
  taskQueue: DEAD_LETTER_TASK_QUEUE,
};
/** The retention of the A2A tasks that ended, EVENTMESH_AGENTS_TASK_RETENTION_DAYS. */
export const A2A_TASK_RETENTION: RetentionSchedule = {
  scheduleId: A2A_TASK_RETENTION_SCHEDULE_ID,
  workflowType: A2A_TASK_RETENTION_WORKFLOW,
  workflowId: 'a2a-task-retention-run',
  taskQueue: A2A_TASK_QUEUE,
};

/**
 * Writes a retention's Temporal schedule: every ten minutes one run of its workflow on its task queue, never two at
 * once (overlap SKIP), with this instance's retention. Idempotent and safe for instances booting together: it is
 * created, or, when it exists, updated to this definition (the last instance to boot sets the retention). Retention
 * 0 (keep everything) deletes the schedule.
 */
export async function ensureRetentionSchedule(
  client: Client,
  retention: RetentionSchedule,
  retentionDays: number,
): Promise<{ scheduleId: string; action: 'created' | 'updated' | 'deleted' | 'absent' }> {
  const { scheduleId } = retention;
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
    spec: { intervals: [{ every: RETENTION_EVERY }] },
    action: {
      type: 'startWorkflow' as const,
      workflowType: retention.workflowType,
      workflowId: retention.workflowId,
      taskQueue: retention.taskQueue,
      // A run no worker picks up (no instance running) ends instead of holding back the next ones (overlap SKIP).
      workflowExecutionTimeout: '30m' as const,
      args: [{ retentionDays }] as [{ retentionDays: number }],
    },
    policies: { overlap: 'SKIP' as const, catchupWindow: RETENTION_EVERY },
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

import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import {
  A2A_TASK_QUEUE,
  a2aSearchAttributes,
  a2aTaskWorkflow,
  a2aTaskWorkflowIdOf,
  CancelOutcome,
  cancelTaskUpdate,
  pushConfiguredSignal,
  taskChangedSignal,
  TaskRequestRecord,
} from '../../workflows';
import type { A2AState } from './task-states';

export interface TaskWorkflowOptions {
  /** A task's deadline (EVENTMESH_AGENTS_TASK_TIMEOUT_MS). */
  timeoutMs: number;
  /** One call to an agent (EVENTMESH_AGENTS_CALL_TIMEOUT_MS). */
  callTimeoutMs: number;
}

/**
 * The gateway's side of the task workflows (workflows/a2a-task.workflow.ts): starts `a2a-task/<taskId>` with the
 * task's ids, its agent's style and the record of its request, and the search attributes operators filter on;
 * waits for one to settle; sends it a cancel (an update) or a change (a signal).
 */
export class TaskWorkflows {
  constructor(
    private readonly client: Client,
    private readonly options: TaskWorkflowOptions,
  ) {}

  /** `push`: the task has push notification configs (given with its send). */
  async start(task: { id: string; tenant: string; agent: string }, style: 'url' | 'subscriber', request: TaskRequestRecord, push = false): Promise<void> {
    await this.client.workflow.start(a2aTaskWorkflow, {
      workflowId: a2aTaskWorkflowIdOf(task.id),
      taskQueue: A2A_TASK_QUEUE,
      args: [{ taskId: task.id, tenant: task.tenant, agent: task.agent, style, request, timeoutMs: this.options.timeoutMs, callTimeoutMs: this.options.callTimeoutMs, ...(push ? { push } : {}) }],
      typedSearchAttributes: [
        { key: a2aSearchAttributes.agent, value: task.agent },
        { key: a2aSearchAttributes.tenant, value: task.tenant },
        { key: a2aSearchAttributes.state, value: 'submitted' },
      ],
      workflowIdConflictPolicy: 'FAIL',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
    });
  }

  /**
   * Resolves when the task's workflow ended (the task settled), or after `boundMs`, whichever comes first; never
   * rejects. The long poll of the result is aborted at the bound, so a send that stopped waiting leaves no call behind.
   */
  async waitSettled(taskId: string, boundMs: number): Promise<void> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), boundMs);
    try {
      await this.client.connection.withAbortSignal(controller.signal, () => this.client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).result());
    } catch {
      // The bound, or a workflow that failed or was terminated, or Temporal unreachable: the caller answers the
      // task as recorded in Postgres, whichever it was.
    } finally {
      clearTimeout(timer);
    }
  }

  /** The cancel, through the task's workflow; `not-running` when it ended (the task settled) or never ran. */
  async cancel(taskId: string): Promise<CancelOutcome | 'not-running'> {
    try {
      return await this.client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).executeUpdate(cancelTaskUpdate);
    } catch (e) {
      if (e instanceof WorkflowNotFoundError || isCompleted(e)) return 'not-running';
      throw e;
    }
  }

  /** Tells the task's workflow of a change recorded by someone else (a mesh-subscriber agent's update). */
  async changed(taskId: string, state: A2AState, version: number): Promise<void> {
    try {
      await this.client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).signal(taskChangedSignal, { state, version });
    } catch (e) {
      // A workflow that ended (the task settled before, e.g. input-required) has nothing to follow.
      if (!(e instanceof WorkflowNotFoundError) && !isCompleted(e)) throw e;
    }
  }

  /** Tells the task's workflow a push notification config was set (it pushes from then on); a workflow that ended has nothing to push. */
  async pushConfigured(taskId: string): Promise<void> {
    try {
      await this.client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).signal(pushConfiguredSignal);
    } catch (e) {
      if (!(e instanceof WorkflowNotFoundError) && !isCompleted(e)) throw e;
    }
  }
}

/** An update sent to a workflow that already ended. */
function isCompleted(e: unknown): boolean {
  return /workflow execution already completed|already completed/i.test((e as Error)?.message ?? '');
}

import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

/**
 * Names and shapes of the A2A task workflow (docs/a2a.md), shared by the workflow, its activities and the gateway
 * that starts and steers it. The workflow holds ids and states only: the task's messages are in Postgres and its
 * request is a record on the agent's request topic, named here by topic, partition and offset.
 */

/** The task queue every instance's worker polls for A2A tasks: any live instance runs any task. */
export const A2A_TASK_QUEUE = 'eventmesh-a2a';
export const a2aTaskWorkflowIdOf = (taskId: string) => `a2a-task/${taskId}`;

/** Registered by `npm run infra -- start temporal` (scripts/infra.sh); the Temporal UI filters tasks on them. */
export const a2aSearchAttributes = {
  agent: defineSearchAttributeKey('EventMeshAgent', SearchAttributeType.KEYWORD),
  state: defineSearchAttributeKey('EventMeshTaskState', SearchAttributeType.KEYWORD),
  tenant: defineSearchAttributeKey('EventMeshTenant', SearchAttributeType.KEYWORD),
};

/** A task's state, as stored (libs/a2a/tasks/task-states.ts: the A2A specification's names). */
export type TaskStateName =
  'submitted' | 'working' | 'input-required' | 'auth-required' | 'completed' | 'failed' | 'canceled' | 'rejected';

/** Where a task's workflow stops: a terminal state, or one that waits for the client (multi-turn is not built). */
export const SETTLED_STATES: readonly TaskStateName[] = [
  'completed',
  'failed',
  'canceled',
  'rejected',
  'input-required',
  'auth-required',
];

/** A task, as its activities name it. */
export interface TaskIds {
  taskId: string;
  tenant: string;
  agent: string;
}

/** The record of the task's request on its agent's request topic. */
export interface TaskRequestRecord {
  topic: string;
  partition: number;
  offset: number;
}

export interface A2ATaskInput {
  taskId: string;
  tenant: string;
  agent: string;
  /** `url`: the mesh delivers the request to the agent's A2A server; `subscriber`: the agent's subscription does. */
  style: 'url' | 'subscriber';
  /**
   * Where the turn's request is in the agent's request topic. Absent for a task's first turn taken since the task row
   * records it (`a2a_tasks.request_record`): the gateway starts the workflow while it writes the record and the row.
   */
  request?: TaskRequestRecord;
  /** The task's deadline from its start; then it fails (and the agent is asked to cancel it). */
  timeoutMs: number;
  /** The deadline of one call to the agent; the delivery activity's heartbeat timeout is derived from it. */
  callTimeoutMs: number;
  /** The agent's retry policy for the delivery (its card's task-policy extension); absent: {@link DEFAULT_DELIVERY_RETRY}. */
  retry?: DeliveryRetryPolicy;
  /**
   * The client's turn this run delivers: absent or 1, the task's first message (the run starts `submitted`); more,
   * a message continuing the task after the agent asked for input (a new run of the same workflow id, starting `working`).
   */
  turn?: number;
  /** The task has push notification configs (given with its send): the workflow pushes each change it sees. */
  push?: boolean;
}

/**
 * The input of {@link a2aTaskCancelWorkflow}'s run: a cancel of a task whose workflow ended (it waits for the client),
 * started with the cancel itself (update-with-start).
 */
export interface A2ATaskCancelInput {
  taskId: string;
  tenant: string;
  agent: string;
  /** The task's state when the cancel was asked (the run's state until the cancel answers). */
  state: TaskStateName;
  /** The deadline of one call to the agent (the cancel at the agent). */
  callTimeoutMs: number;
}

/** How the delivery to an agent is tried again (Temporal's retry of the delivery activity). */
export interface DeliveryRetryPolicy {
  initialIntervalMs: number;
  backoffCoefficient: number;
  maximumIntervalMs: number;
  /** 0: no limit but the task's timeout. */
  maximumAttempts: number;
}

/** The retry of a delivery when the agent's card names none: 0.5 s doubling to 5 s, until the task's timeout. */
/**
 * Most a turn's first delivery attempt may take (a send, a moment of following, and a last call to the agent): the
 * local activity's bound in the workflow, and that of the attempt the process that took the task begins at once
 * (libs/a2a/relay/first-attempts.ts).
 */
export const firstAttemptTimeoutMs = (callTimeoutMs: number) => 2 * callTimeoutMs + 5_000;

export const DEFAULT_DELIVERY_RETRY: DeliveryRetryPolicy = {
  initialIntervalMs: 500,
  backoffCoefficient: 2,
  maximumIntervalMs: 5000,
  maximumAttempts: 0,
};

/** What one step of the task's activities says: the state the task is in now (in Postgres). */
export interface TaskStep {
  state: TaskStateName;
}

/** The outcome of a cancel: `canceled`; `not-cancelable` (it ended first); `unreachable` (the agent did not answer the cancel). */
export interface CancelOutcome {
  outcome: 'canceled' | 'not-cancelable' | 'unreachable' | 'missing';
  state?: TaskStateName;
  /** Why, for `unreachable`. */
  reason?: string;
}

/** Cancels the task: stops its delivery, cancels it at the agent and in Postgres (compare-and-set); says how it went. */
export const cancelTaskUpdate = defineUpdate<CancelOutcome>('cancel');
/** A change recorded in Postgres by someone else (a mesh-subscriber agent's update): its state and the task's version then. */
export interface TaskChanged {
  state: TaskStateName;
  version: number;
}
export const taskChangedSignal = defineSignal<[TaskChanged]>('changed');
/** A push notification config was set on the task: from now on the workflow pushes each change it sees. */
export const pushConfiguredSignal = defineSignal('push-configured');
/** The task's state as the workflow knows it. */
export const taskStateQuery = defineQuery<TaskStateName>('state');

/** What one push of a task did, per config: delivered, given up after the last attempt, or the config gone (410). */
export interface PushOutcome {
  delivered: number;
  givenUp: number;
  gone: number;
}

/** The activities of an A2A task's workflows (activities/a2a-task.activities.ts), as the workflows call them. */
export interface A2ATaskActivities {
  deliverTask(
    input: TaskIds & { request?: TaskRequestRecord; callTimeoutMs: number; turn?: number },
  ): Promise<TaskStep>;
  pushTask(ids: TaskIds): Promise<PushOutcome>;
  cancelTask(ids: TaskIds): Promise<CancelOutcome>;
  purgeExpiredTasks(input: { retentionDays: number }): Promise<number>;
  failTask(input: TaskIds & { reason: string }): Promise<TaskStep>;
}

/** The A2A task workflows' types and signatures: a client starts them by these names, without their code. */
export const A2A_TASK_WORKFLOW = 'a2aTaskWorkflowV2';
export type A2ATaskWorkflow = (input: A2ATaskInput) => Promise<TaskStateName>;
/** The retention run of the A2A tasks that ended, started by its Temporal schedule; its input is a `RetentionInput`. */
export const A2A_TASK_RETENTION_WORKFLOW = 'a2aTaskRetentionWorkflow';
export const A2A_TASK_CANCEL_WORKFLOW = 'a2aTaskCancelWorkflow';
export type A2ATaskCancelWorkflow = (input: A2ATaskCancelInput) => Promise<TaskStateName>;

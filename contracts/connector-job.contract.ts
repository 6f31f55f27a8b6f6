import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal } from '@temporalio/workflow';

/**
 * Names and shapes of a connector job's workflow (workflows/connector-job.workflow.ts) and its run activity
 * (apps/connectors/src/jobs/job-activities.ts). The workflow holds the job's id and its paused flag only: the
 * job's config, position and dead letters are in the connector runtime's own schema (`connectors.*`).
 */

/** The task queue every connector replica polls: any live replica runs any job, one at a time (the run's epoch). */
export const CONNECTOR_JOB_QUEUE = 'eventmesh-connectors';
export const connectorJobWorkflowIdOf = (jobId: string) => `connector-job/${jobId}`;

/** Registered by scripts/infra.sh beside the runtime's own; the Temporal UI filters jobs on them. */
export const connectorJobSearchAttributes = {
  kind: defineSearchAttributeKey('EventMeshConnectorKind', SearchAttributeType.KEYWORD),
  tenant: defineSearchAttributeKey('EventMeshTenant', SearchAttributeType.KEYWORD),
  state: defineSearchAttributeKey('EventMeshJobState', SearchAttributeType.KEYWORD),
};

/** A job's state as the workflow and `/admin/jobs` report it. */
export type ConnectorJobState = 'RUNNING' | 'PAUSED' | 'FAILED';

export interface ConnectorJobInput {
  jobId: string;
  /** How long one activity run lasts before it returns and is started again (a fresh epoch each time). */
  runMs: number;
  /** The run's heartbeat timeout: a replica silent this long loses the job to another. */
  heartbeatMs: number;
  paused?: boolean;
  runsPerExecution?: number;
}

/** What one run reports; its heartbeat details carry the same, so the Temporal UI shows the job's progress. */
export interface ConnectorRunProgress {
  epoch: number;
  /** Records (source) or events (sink) moved in this run. */
  moved: number;
  deadLettered: number;
  /** The source's position after the last committed round, as text (the connector's own format). */
  position?: string;
  lastError?: string;
}

export interface ConnectorRunResult extends ConnectorRunProgress {
  stoppedBy: 'deadline' | 'cancelled' | 'job-gone';
}

export interface ConnectorJobActivities {
  runConnectorJob(input: { jobId: string; runMs: number }): Promise<ConnectorRunResult>;
  recordJobState(input: { jobId: string; state: ConnectorJobState }): Promise<void>;
}

/** Operator control (admin API or Temporal UI): stop after cancelling the current run (true), or resume (false). */
export const pauseJobSignal = defineSignal<[boolean]>('pause');
/** Operator control: end the current run now and start a new one (a new epoch; the config read afresh). */
export const restartJobSignal = defineSignal('restart');
export const jobStatusQuery = defineQuery<{
  jobId: string;
  paused: boolean;
  runs: number;
  lastRun?: ConnectorRunResult;
}>('status');

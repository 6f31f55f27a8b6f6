import { defineQuery, defineSignal } from '@temporalio/workflow';

/**
 * Names and shapes of LOCAL_STICKY_PULL's dispatch workflow (workflows/dispatch.workflow.ts), its poll-and-dispatch
 * activity (activities/dispatch.activities.ts), and what the loop reports (libs/delivery).
 */

/** What the loop reports; the activity sends it as its heartbeat details. */
export interface DispatchProgress {
  rounds: number;
  delivered: number;
  failedAttempts: number;
  parked: number;
  deadLettered: number;
  /** Events a subscription's filters passed over. */
  filteredOut: number;
  /** Replayed events that were dead-lettered before (by a run that crashed before its commit): passed over. */
  passedOverDeadLettered?: number;
  subscriptions: number;
  partitions: number;
  /** Events in Kafka not yet settled, summed over every subscription partition. */
  lag: number;
  /** The lowest offset some lane has not settled (with a scope: what a new owner would start from). */
  committedOffset?: number;
  /** The highest log end offset seen. */
  highWatermark?: number;
  /** Rounds in which the gate held the loop back. */
  gatedRounds: number;
  /** Ranges of events Kafka retention deleted before delivery, recorded (skipped_ranges), and the events in them. */
  skippedRanges: number;
  skippedEvents: number;
  /** Times a subscription's circuit breaker opened (from closed, or after a failed probe). */
  breakerOpenings: number;
  /** Subscriptions whose breaker is open or half-open now. */
  openBreakers: number;
  /** Failing events held at the head of their lane because their subscription had its cap of parked deliveries. */
  heldAtParkingCap: number;
  /** `key` ordering: events parked behind an earlier parked event of their key, without an attempt (held-keys.ts). */
  parkedBehind?: number;
  /** Parked deliveries delivered by ordered recovery (in offset order, before new events). */
  recovered: number;
  /** Lanes restarted from new offsets because an operator's seek moved them (dispatch-loop.ts, `refresh`). */
  seeksApplied?: number;
  /** Commits refused as BACKWARDS: the stored offset was already past the lane (offset-committer.ts). */
  commitsBehind: number;
  committedAt?: string;
}

export interface DispatchRunInput {
  instanceId: string;
  /** How long this run dispatches before it returns. */
  runMs: number;
}

export interface DispatchRunResult extends DispatchProgress {
  stoppedBy: 'deadline' | 'shutdown';
}

/** The failure type of an attempt whose dispatch run was fenced; retryable: the next attempt claims a newer epoch. */
export const DISPATCH_RUN_FENCED = 'DispatchRunFenced';

/** The instance's dispatch workflow, `dispatch/<instance id>`: the worker starts it by this name, without its code. */
export const INSTANCE_DISPATCH_WORKFLOW = 'instanceDispatchWorkflow';
export type InstanceDispatchWorkflow = (input: InstanceDispatchInput) => Promise<void>;

export interface InstanceDispatchInput {
  instanceId: string;
  leaseTtlMs: number;
  /** How long one activity run lasts before it returns and is started again. */
  runMs: number;
  runsPerExecution?: number;
  /** Carried across continue-as-new, so a pause survives it. */
  totals?: DispatchTotals;
  paused?: boolean;
}

export interface DispatchTotals {
  runs: number;
  delivered: number;
  failedAttempts: number;
}

export interface InstanceDispatchStatus {
  instanceId: string;
  paused: boolean;
  totals: DispatchTotals;
  lastRun?: DispatchRunResult;
}

export const dispatchStatusQuery = defineQuery<InstanceDispatchStatus>('status');
/** Operator control: stop dispatching after the current run (true) or resume (false). */
export const pauseDispatchSignal = defineSignal<[boolean]>('pause');

/** The poll-and-dispatch activity (activities/dispatch.activities.ts), as the dispatch workflow calls it. */
export interface DispatchActivities {
  pollAndDispatch(input: DispatchRunInput): Promise<DispatchRunResult>;
}

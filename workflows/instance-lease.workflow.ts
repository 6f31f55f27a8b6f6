import { ActivityFailure } from '@temporalio/common';
import { getExternalWorkflowHandle, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { OwnershipActivities } from '../activities';
import { COORDINATOR_WORKFLOW_ID, instanceTaskQueueOf, leaveSignal, LeaveNotice } from './ownership.definitions';

/**
 * One per live instance in PARTITION_OWNED_PULL, id `instance/<instanceId>`, on the shared control queue. It runs
 * the instance's lease activity on the instance's own task queue with `heartbeatTimeout` equal to the lease TTL.
 * When the heartbeat times out (the process died, hangs, or is cut off from Temporal), or the activity was never
 * picked up, the instance is lost: the workflow tells the coordinator and ends. A clean shutdown ends the
 * activity, and the coordinator hears `stopped`. Heartbeats do not add to the history.
 */
export interface InstanceLeaseInput {
  instanceId: string;
  leaseTtlMs: number;
}

export async function instanceLeaseWorkflow(input: InstanceLeaseInput): Promise<LeaveNotice> {
  const { holdInstanceLease } = proxyActivities<OwnershipActivities>({
    taskQueue: instanceTaskQueueOf(input.instanceId),
    heartbeatTimeout: input.leaseTtlMs,
    scheduleToStartTimeout: 3 * input.leaseTtlMs,
    startToCloseTimeout: '3650 days',
    retry: { maximumAttempts: 1 },
  });
  let notice: LeaveNotice;
  try {
    await holdInstanceLease({ instanceId: input.instanceId });
    notice = { instanceId: input.instanceId, leaseRunId: workflowInfo().runId, reason: 'stopped' };
  } catch (e) {
    const cause = e instanceof ActivityFailure && e.cause ? e.cause : e;
    notice = {
      instanceId: input.instanceId,
      leaseRunId: workflowInfo().runId,
      reason: 'lost',
      detail: cause instanceof Error ? cause.message : String(cause),
    };
  }
  try {
    await getExternalWorkflowHandle(COORDINATOR_WORKFLOW_ID).signal(leaveSignal, notice);
  } catch {
    // No coordinator (it was ended from outside): there is no membership to leave.
  }
  return notice;
}

import { ActivityFailure } from '@temporalio/common';
import {
  CancellationScope,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { OwnershipActivities } from '../contracts';
import {
  COORDINATOR_WORKFLOW_ID,
  InstanceLeaseInput,
  instanceTaskQueueOf,
  joinSignal,
  leaveSignal,
  LeaveNotice,
  livenessLostSignal,
  rejoinSignal,
} from '../contracts';

/**
 * One per live instance in PARTITION_OWNED_PULL, id `instance/<instanceId>`, on the shared control queue. It joins
 * the coordinator with its own run id (so the membership and this lease cannot come apart), then runs the
 * instance's lease activity on the instance's own task queue with `heartbeatTimeout` equal to the lease TTL.
 * When the heartbeat times out (the process died, hangs, or is cut off from Temporal), or the activity was never
 * picked up, the instance is lost: the workflow tells the coordinator and ends. A clean shutdown ends the
 * activity, and the coordinator hears `stopped`. Heartbeats do not add to the history.
 *
 * A crash need not wait for the heartbeat timeout: a peer that finds the instance's liveness lock released (its
 * Postgres session ended with the process; libs/ownership/crash-watch.ts) signals `livenessLost`, and the lease
 * ends as lost at once, by the same path.
 */
export async function instanceLeaseWorkflow(input: InstanceLeaseInput): Promise<LeaveNotice> {
  const { holdInstanceLease } = proxyActivities<OwnershipActivities>({
    taskQueue: instanceTaskQueueOf(input.instanceId),
    heartbeatTimeout: input.leaseTtlMs,
    scheduleToStartTimeout: 3 * input.leaseTtlMs,
    startToCloseTimeout: '3650 days',
    retry: { maximumAttempts: 1 },
  });
  const leaseRunId = workflowInfo().runId;
  const coordinator = getExternalWorkflowHandle(COORDINATOR_WORKFLOW_ID);
  // Only a running lease can join: a completed one cannot be signalled, so no join outlives its lease.
  setHandler(rejoinSignal, async (partitions) => {
    await coordinator
      .signal(joinSignal, { instanceId: input.instanceId, leaseRunId, partitions })
      .catch(() => undefined);
  });
  if (patched('lease-joins-coordinator')) {
    try {
      await coordinator.signal(joinSignal, {
        instanceId: input.instanceId,
        leaseRunId,
        partitions: input.partitions ?? [],
      });
    } catch (e) {
      // No coordinator to join: the instance sees this run end and joins again (starting the coordinator).
      return { instanceId: input.instanceId, leaseRunId, reason: 'lost', detail: `could not join: ${describe(e)}` };
    }
  }
  const held = new CancellationScope();
  let livenessLost: string | undefined;
  setHandler(livenessLostSignal, (detail) => {
    livenessLost ??= detail;
    held.cancel();
  });
  let notice: LeaveNotice;
  try {
    await held.run(() => holdInstanceLease({ instanceId: input.instanceId }));
    notice = { instanceId: input.instanceId, leaseRunId, reason: 'stopped' };
  } catch (e) {
    notice = { instanceId: input.instanceId, leaseRunId, reason: 'lost', detail: livenessLost ?? describe(e) };
  }
  try {
    await coordinator.signal(leaveSignal, notice);
  } catch {
    // No coordinator (it was ended from outside): there is no membership to leave.
  }
  return notice;
}

function describe(e: unknown): string {
  const cause = e instanceof ActivityFailure && e.cause ? e.cause : e;
  return cause instanceof Error ? cause.message : String(cause);
}

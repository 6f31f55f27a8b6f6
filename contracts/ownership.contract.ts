import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

/**
 * Names, messages and shapes of the PARTITION_OWNED_PULL protocol, shared by its three workflows, the activities,
 * and the instance side that starts and steers them (docs/topologies.md).
 */

/** `topic#partition`, the key of a partition everywhere in the ownership protocol. */
export type PartitionKey = string;

export const partitionKeyOf = (topic: string, partition: number): PartitionKey => `${topic}#${partition}`;

export function parsePartitionKey(key: PartitionKey): { topic: string; partition: number } {
  const at = key.lastIndexOf('#');
  return { topic: key.slice(0, at), partition: Number(key.slice(at + 1)) };
}

/** The task queue every instance's workflow worker polls: coordinator, partition and instance-lease workflows. */
export const CONTROL_TASK_QUEUE = 'eventmesh-control';
export const COORDINATOR_WORKFLOW_ID = 'eventmesh-coordinator';
export const partitionWorkflowIdOf = (topic: string, partition: number) => `partition/${topic}/${partition}`;
export const instanceWorkflowIdOf = (instanceId: string) => `instance/${instanceId}`;
/** An instance's own task queue: its activities (the lease, and the poll loops of the partitions it owns). */
export const instanceTaskQueueOf = (instanceId: string) => `eventmesh-${instanceId}`;

/**
 * The workflow task timeout of the coordinator, partition and instance-lease workflows: half the lease TTL, within
 * 2-10 s. A task handed to an instance that is paused (SIGSTOP, a long GC, a frozen VM) is lost until this timeout
 * (Temporal's default is 10 s); every live instance's worker polls the control queue, so without it each step of
 * a takeover could wait that long behind the very instance being replaced.
 */
export const controlWorkflowTaskTimeoutMs = (leaseTtlMs: number): number =>
  Math.min(10_000, Math.max(2_000, Math.floor(leaseTtlMs / 2)));

/** Registered by `npm run infra -- start temporal` (scripts/infra.sh); the Temporal UI filters on them. */
export const searchAttributes = {
  topic: defineSearchAttributeKey('EventMeshTopic', SearchAttributeType.KEYWORD),
  partition: defineSearchAttributeKey('EventMeshPartition', SearchAttributeType.INT),
  owner: defineSearchAttributeKey('EventMeshOwner', SearchAttributeType.KEYWORD),
  epoch: defineSearchAttributeKey('EventMeshEpoch', SearchAttributeType.INT),
};

// --- coordinator -------------------------------------------------------------------------------------------

/** Owner per partition; `undefined` when no instance is eligible. */
export type Assignment = Record<PartitionKey, string | undefined>;

export interface CoordinatorInput {
  leaseTtlMs: number;
  runMs: number;
  state?: CoordinatorState;
  /** History length after which it continues as new (default 2,000). */
  maxHistoryEvents?: number;
}

export interface CoordinatorState {
  members: Record<string, { leaseRunId: string }>;
  drained: string[];
  pins: Record<PartitionKey, string>;
  partitions: PartitionKey[];
  assignment: Assignment;
  /** Partitions whose workflow this coordinator started (it is signalled from then on). */
  started: PartitionKey[];
  generation: number;
}

/** The coordinator workflow's type and signature: a client starts it by this name, without its code. */
export const COORDINATOR_WORKFLOW = 'coordinatorWorkflow';
export type CoordinatorWorkflow = (input: CoordinatorInput) => Promise<void>;

export interface JoinRequest {
  instanceId: string;
  /** The run of `instance/<instanceId>` that holds this membership; a leave from another run is ignored. */
  leaseRunId: string;
  /** The partitions this instance serves (every instance of a runtime is configured with the same topics). */
  partitions: PartitionKey[];
}

export interface LeaveNotice {
  instanceId: string;
  leaseRunId: string;
  /**
   * `lost`: the lease heartbeat timed out (crash, or cut off from Temporal), or a peer found the instance's
   * liveness lock released (a crash, at once); `stopped`: a clean shutdown.
   */
  reason: 'lost' | 'stopped';
  detail?: string;
}

export interface PartitionMove {
  partition: PartitionKey;
  from?: string;
  to?: string;
}

export interface AssignmentView {
  members: string[];
  drained: string[];
  pins: Record<PartitionKey, string>;
  /** Every known partition; null when no instance is eligible to own it. */
  owners: Record<PartitionKey, string | null>;
  /** Raised every time the assignment is recomputed. */
  generation: number;
}

export const joinSignal = defineSignal<[JoinRequest]>('join');
/** To an instance's lease workflow: join the coordinator again with these partitions (a new coordinator run, or new partitions). */
export const rejoinSignal = defineSignal<[PartitionKey[]]>('rejoin');
export const leaveSignal = defineSignal<[LeaveNotice]>('leave');
/**
 * To an instance's lease workflow, from a peer that found the instance's liveness lock released (its Postgres
 * session ended: the process crashed) and holds that lock itself: end the lease now, as lost, with this detail.
 */
export const livenessLostSignal = defineSignal<[string]>('livenessLost');
/** Move every partition away from an instance (`drained: true`), or let it own partitions again. */
export const drainUpdate = defineUpdate<PartitionMove[], [{ instanceId: string; drained: boolean }]>('drain');
/** Pin one partition to a named instance; it moves there gracefully. */
export const moveUpdate = defineUpdate<PartitionMove[], [{ partition: PartitionKey; to: string }]>('move');
export const assignmentQuery = defineQuery<AssignmentView>('assignment');

// --- partition owner ---------------------------------------------------------------------------------------

export interface AssignOwner {
  /** The new owner, or none (no eligible instance). */
  owner?: string;
  /** Planned move (the old owner is alive): wait for it to settle and commit before the new owner starts. */
  graceful: boolean;
}

/** What the poll activity reports about its partition; offsets and counts only, never events. */
export interface PartitionProgress {
  /** The epoch of the run reporting. */
  epoch: number;
  /** The lowest offset some subscription has not settled yet (what a new owner would start from). */
  committedOffset?: number;
  highWatermark?: number;
  lag: number;
  delivered: number;
  subscriptions: number;
  reportedAt: string;
}

export interface PartitionStatus {
  topic: string;
  partition: number;
  owner?: string;
  epoch: number;
  /** The owner's poll activity is scheduled or running. */
  polling: boolean;
  committedOffset?: number;
  lag?: number;
  delivered: number;
  progressAt?: string;
  /** How many times a running poll was moved to another owner. */
  ownerChanges: number;
  lastFailure?: string;
}

export const assignOwnerSignal = defineSignal<[AssignOwner]>('assignOwner');
export const partitionProgressSignal = defineSignal<[PartitionProgress]>('progress');
export const partitionStatusQuery = defineQuery<PartitionStatus>('status');

// --- activities' contract ----------------------------------------------------------------------------------

export interface PollPartitionInput {
  topic: string;
  partition: number;
  owner: string;
  epoch: number;
  /** How long this run lasts before it returns and the workflow starts the next one. */
  runMs: number;
}

export interface PollPartitionResult {
  delivered: number;
  committedOffset?: number;
  stoppedBy: 'deadline' | 'shutdown' | 'cancelled';
}

/** The activity failure types the partition workflow tells apart. */
export const EPOCH_BEHIND = 'EpochBehind';
export const FENCED = 'Fenced';
export const WRONG_INSTANCE = 'WrongInstance';
/** The run belongs to a lease run the instance no longer holds, while it holds a newer one, confirmed. */
export const LEASE_RUN_ENDED = 'LeaseRunEnded';

/** The activities of the ownership protocol (activities/ownership.activities.ts), as its workflows call them. */
export interface OwnershipActivities {
  /** Holds the instance's lease while the instance runs: returns on its shutdown, or when the workflow cancels it. */
  holdInstanceLease(input: { instanceId: string }): Promise<{ stoppedBy: 'shutdown' | 'cancelled' }>;
  pollPartition(input: PollPartitionInput): Promise<PollPartitionResult>;
}

// --- instance lease ----------------------------------------------------------------------------------------

export interface InstanceLeaseInput {
  instanceId: string;
  leaseTtlMs: number;
  /** The partitions this instance serves; absent in runs started before the workflow joined by itself. */
  partitions?: PartitionKey[];
}

/** The instance-lease workflow's type and signature: a client starts it by this name, without its code. */
export const INSTANCE_LEASE_WORKFLOW = 'instanceLeaseWorkflow';
export type InstanceLeaseWorkflow = (input: InstanceLeaseInput) => Promise<LeaveNotice>;

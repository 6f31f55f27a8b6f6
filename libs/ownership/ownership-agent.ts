import { Client, WorkflowNotFoundError } from '@temporalio/client';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '@libs/logging';
import { reasonOf, withDeadline } from '@libs/runtime';
import {
  COORDINATOR_WORKFLOW_ID,
  CONTROL_TASK_QUEUE,
  controlWorkflowTaskTimeoutMs,
  COORDINATOR_WORKFLOW,
  CoordinatorWorkflow,
  INSTANCE_LEASE_WORKFLOW,
  InstanceLeaseWorkflow,
  instanceWorkflowIdOf,
  PartitionKey,
  rejoinSignal,
} from '../../contracts';

export interface OwnershipAgentOptions {
  instanceId: string;
  leaseTtlMs: number;
  /** How long one partition poll run lasts before its workflow starts the next (the coordinator's setting). */
  partitionRunMs: number;
  /** The partitions this instance serves. */
  partitions: () => Promise<PartitionKey[]>;
  /** The instance's liveness lock in Postgres (liveness-lock.ts); absent: the lease alone. */
  liveness?: { confirmed(): boolean; acquiredAt(): number };
}

/** Every this many confirmations (about one TTL), the coordinator is checked and new partitions are announced. */
const MEMBERSHIP_CHECK_EVERY = 5;

/**
 * The instance's side of membership in PARTITION_OWNED_PULL.
 *
 * Joining: it makes sure the coordinator runs, then starts `instance/<id>`, which joins the coordinator with its
 * own run id and runs the lease activity this instance's worker hosts. Membership and lease cannot come apart:
 * only a running lease joins, and its end tells the coordinator.
 *
 * Self-fencing: every fifth of the TTL it asks Temporal, with a deadline, whether its lease run is still running.
 * {@link confirmedFor} is true only while such an answer, counted from when the question was sent, came within
 * half a TTL, and only for the lease run it names: the partition loops neither fetch nor deliver otherwise. An
 * instance cut off from Temporal therefore holds before the TTL after which the others take its partitions, and
 * loops started under a lease the instance lost stay closed after it joins again. If contact returns before the
 * TTL, nothing moved and it goes on. If the lease run ended (the instance was declared lost), it joins again and
 * gets its share back. About once a TTL it also re-announces itself when the coordinator was restarted or the
 * topics gained partitions.
 */
export class OwnershipAgent {
  private readonly log = createLogger('OwnershipAgent');
  private confirmedAt = 0;
  private leaseRunId?: string;
  private coordinatorRunId?: string;
  private announced = '';
  private joining?: Promise<void>;
  private readonly stopped = new AbortController();
  private loop?: Promise<void>;
  /** How many lease runs this instance started (1 after boot; more after being declared lost and coming back). */
  joins = 0;

  constructor(
    private readonly client: Client,
    private readonly options: OwnershipAgentOptions,
  ) {}

  get windowMs(): number {
    return Math.floor(this.options.leaseTtlMs / 2);
  }

  /**
   * This instance's membership was confirmed by Temporal within the last half TTL, and its liveness lock is held
   * and confirmed, by a session that took it before that Temporal confirmation was asked: after the lock was lost
   * and taken again, a peer may have ended the lease meanwhile, and only a later answer from Temporal can say not.
   */
  confirmed(): boolean {
    const { liveness } = this.options;
    return (
      Date.now() - this.confirmedAt < this.windowMs &&
      (!liveness || (liveness.confirmed() && liveness.acquiredAt() <= this.confirmedAt))
    );
  }

  /** Confirmed, and `leaseRunId` is still this instance's lease run (a loop bound to an older one stays closed). */
  confirmedFor(leaseRunId: string | undefined): boolean {
    return leaseRunId !== undefined && leaseRunId === this.leaseRunId && this.confirmed();
  }

  /** The lease run this instance holds now (undefined before it first joined). */
  currentLeaseRun(): string | undefined {
    return this.leaseRunId;
  }

  /**
   * What /health shows: whether partition loops may work now, when the last confirmation was asked (epoch ms; the
   * loops hold from then plus {@link windowMs}), and how often this instance joined.
   */
  status(): {
    confirmed: boolean;
    confirmedAt: number | null;
    confirmedAgoMs: number | null;
    windowMs: number;
    joins: number;
    leaseRunId?: string;
  } {
    return {
      confirmed: this.confirmed(),
      confirmedAt: this.confirmedAt > 0 ? this.confirmedAt : null,
      windowMs: this.windowMs,
      confirmedAgoMs: this.confirmedAt > 0 ? Date.now() - this.confirmedAt : null,
      joins: this.joins,
      leaseRunId: this.leaseRunId,
    };
  }

  /** Joins (at boot a failure is the caller's) and confirms once, then keeps confirming in the background. */
  async start(): Promise<void> {
    await this.join('TERMINATE_EXISTING');
    await this.confirmOnce(Math.max(1000, this.windowMs)).catch(() => undefined);
    this.loop = this.confirmLoop();
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
  }

  /**
   * At boot a lease run left by this instance's previous process is replaced (`TERMINATE_EXISTING`: the same
   * member, so no `lost` notice). Later joins never end a run: one this process started and lost track of
   * (a call that timed out) is adopted instead (`USE_EXISTING`).
   */
  private async join(conflict: 'TERMINATE_EXISTING' | 'USE_EXISTING'): Promise<void> {
    const { instanceId, leaseTtlMs } = this.options;
    await this.ensureCoordinator();
    const partitions = await this.options.partitions();
    const lease = await this.client.workflow.start<InstanceLeaseWorkflow>(INSTANCE_LEASE_WORKFLOW, {
      workflowId: instanceWorkflowIdOf(instanceId),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ instanceId, leaseTtlMs, partitions }],
      workflowIdConflictPolicy: conflict,
      workflowTaskTimeout: controlWorkflowTaskTimeoutMs(leaseTtlMs),
    });
    if (lease.firstExecutionRunId !== this.leaseRunId) this.joins++;
    this.leaseRunId = lease.firstExecutionRunId;
    this.announced = partitions.join(',');
    this.log.info({ instanceId, leaseRunId: this.leaseRunId, joins: this.joins }, 'joined the partition owners');
  }

  /** Starts the coordinator if no instance has yet; answers whether its run changed since last seen. */
  private async ensureCoordinator(): Promise<boolean> {
    const handle = await this.client.workflow.start<CoordinatorWorkflow>(COORDINATOR_WORKFLOW, {
      workflowId: COORDINATOR_WORKFLOW_ID,
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ leaseTtlMs: this.options.leaseTtlMs, runMs: this.options.partitionRunMs }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowTaskTimeout: controlWorkflowTaskTimeoutMs(this.options.leaseTtlMs),
    });
    const changed = this.coordinatorRunId !== undefined && handle.firstExecutionRunId !== this.coordinatorRunId;
    this.coordinatorRunId = handle.firstExecutionRunId;
    return changed;
  }

  private async confirmLoop(): Promise<void> {
    const every = Math.max(200, Math.floor(this.options.leaseTtlMs / 5));
    let wasConfirmed = this.confirmed();
    for (let round = 1; !this.stopped.signal.aborted; round++) {
      await sleep(every, undefined, { signal: this.stopped.signal }).catch(() => undefined);
      if (this.stopped.signal.aborted) break;
      try {
        await this.confirmOnce(every);
        if (round % MEMBERSHIP_CHECK_EVERY === 0 && this.confirmed()) await withDeadline(every, this.announce());
      } catch (e) {
        this.log.debug({ error: reasonOf(e) }, 'could not confirm the lease with Temporal');
      }
      const now = this.confirmed();
      if (now !== wasConfirmed) {
        if (now) this.log.info('lease confirmed again; partition loops resume');
        else
          this.log.warn(
            { windowMs: this.windowMs },
            'lease not confirmed by Temporal within the window, or the liveness lock not held; partition loops hold',
          );
        wasConfirmed = now;
      }
    }
  }

  private async confirmOnce(deadlineMs: number): Promise<void> {
    const handle = this.client.workflow.getHandle(instanceWorkflowIdOf(this.options.instanceId));
    const askedAt = Date.now();
    let running = false;
    try {
      const description = await withDeadline(deadlineMs, handle.describe());
      running = description.status.name === 'RUNNING' && description.runId === this.leaseRunId;
    } catch (e) {
      if (!(e instanceof WorkflowNotFoundError)) throw e;
    }
    if (running) {
      // Counted from the question, not the answer: a process paused while waiting does not take an old answer as fresh.
      this.confirmedAt = askedAt;
      return;
    }
    // Declared lost (or the lease run was ended by someone): nothing is ours until we have joined again.
    this.confirmedAt = 0;
    if (!this.joining) {
      this.log.warn({ instanceId: this.options.instanceId }, 'this instance was declared lost; joining again');
      this.joining = this.join('USE_EXISTING').finally(() => (this.joining = undefined));
    }
    await withDeadline(2 * deadlineMs, this.joining);
  }

  /** Joins again through the lease run when the coordinator was restarted or the topics gained partitions. */
  private async announce(): Promise<void> {
    const restarted = await this.ensureCoordinator();
    const partitions = await this.options.partitions();
    if (!restarted && partitions.join(',') === this.announced) return;
    await this.client.workflow
      .getHandle(instanceWorkflowIdOf(this.options.instanceId), this.leaseRunId)
      .signal(rejoinSignal, partitions);
    this.announced = partitions.join(',');
    this.log.info(
      { partitions: partitions.length, coordinatorRestarted: restarted },
      'announced this instance to the coordinator again',
    );
  }
}

import { Client, WorkflowNotFoundError } from '@temporalio/client';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '../logging';
import { reasonOf, withDeadline } from '../runtime';
import {
  COORDINATOR_WORKFLOW_ID,
  CONTROL_TASK_QUEUE,
  coordinatorWorkflow,
  instanceLeaseWorkflow,
  instanceWorkflowIdOf,
  joinSignal,
  PartitionKey,
} from '../../workflows';

export interface OwnershipAgentOptions {
  instanceId: string;
  leaseTtlMs: number;
  /** How long one partition poll run lasts before its workflow starts the next (the coordinator's setting). */
  partitionRunMs: number;
  /** The partitions this instance serves. */
  partitions: () => Promise<PartitionKey[]>;
}

/**
 * The instance's side of membership in PARTITION_OWNED_PULL.
 *
 * Joining: it starts `instance/<id>` (whose lease activity this instance's worker runs) and then signals the
 * coordinator `join` with that run's id, starting the coordinator if no instance has yet.
 *
 * Self-fencing: every fifth of the TTL it asks Temporal, with a deadline, whether its lease run is still running.
 * {@link confirmed} is true only while such an answer came within half a TTL, and the partition loops neither
 * fetch nor deliver otherwise: an instance cut off from Temporal stops before the TTL after which the others take
 * its partitions. If contact returns before the TTL, nothing moved and it goes on. If the lease run ended (the
 * instance was declared lost), it joins again and gets its share back.
 */
export class OwnershipAgent {
  private readonly log = createLogger('OwnershipAgent');
  private confirmedAt = 0;
  private leaseRunId?: string;
  private readonly stopped = new AbortController();
  private loop?: Promise<void>;
  /** How many times this instance joined (1 after boot; more after being declared lost and coming back). */
  joins = 0;

  constructor(
    private readonly client: Client,
    private readonly options: OwnershipAgentOptions,
  ) {}

  get windowMs(): number {
    return Math.floor(this.options.leaseTtlMs / 2);
  }

  /** This instance's membership was confirmed by Temporal within the last half TTL. */
  confirmed(): boolean {
    return Date.now() - this.confirmedAt < this.windowMs;
  }

  /** What /health shows: whether partition loops may work now, and how often this instance joined. */
  status(): { confirmed: boolean; confirmedAgoMs: number | null; joins: number; leaseRunId?: string } {
    return {
      confirmed: this.confirmed(),
      confirmedAgoMs: this.confirmedAt > 0 ? Date.now() - this.confirmedAt : null,
      joins: this.joins,
      leaseRunId: this.leaseRunId,
    };
  }

  /** Joins (at boot a failure is the caller's), then keeps confirming in the background. */
  async start(): Promise<void> {
    await this.join();
    this.loop = this.confirmLoop();
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
  }

  private async join(): Promise<void> {
    const { instanceId, leaseTtlMs } = this.options;
    const lease = await this.client.workflow.start(instanceLeaseWorkflow, {
      workflowId: instanceWorkflowIdOf(instanceId),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ instanceId, leaseTtlMs }],
      // A run left by this instance's previous process is replaced without a `lost` notice: it is the same member.
      workflowIdConflictPolicy: 'TERMINATE_EXISTING',
    });
    this.leaseRunId = lease.firstExecutionRunId;
    await this.client.workflow.signalWithStart(coordinatorWorkflow, {
      workflowId: COORDINATOR_WORKFLOW_ID,
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ leaseTtlMs, runMs: this.options.partitionRunMs }],
      signal: joinSignal,
      signalArgs: [{ instanceId, leaseRunId: lease.firstExecutionRunId, partitions: await this.options.partitions() }],
    });
    this.confirmedAt = Date.now();
    this.joins++;
    this.log.info({ instanceId, leaseRunId: this.leaseRunId, joins: this.joins }, 'joined the partition owners');
  }

  private async confirmLoop(): Promise<void> {
    const every = Math.max(200, Math.floor(this.options.leaseTtlMs / 5));
    let wasConfirmed = true;
    while (!this.stopped.signal.aborted) {
      await sleep(every, undefined, { signal: this.stopped.signal }).catch(() => undefined);
      if (this.stopped.signal.aborted) break;
      try {
        await this.confirmOnce(every);
      } catch (e) {
        this.log.debug({ error: reasonOf(e) }, 'could not confirm the lease with Temporal');
      }
      const now = this.confirmed();
      if (now !== wasConfirmed) {
        if (now) this.log.info('lease confirmed by Temporal again; partition loops resume');
        else this.log.warn({ windowMs: this.windowMs }, 'lease not confirmed by Temporal within the window; partition loops hold');
        wasConfirmed = now;
      }
    }
  }

  private async confirmOnce(deadlineMs: number): Promise<void> {
    const handle = this.client.workflow.getHandle(instanceWorkflowIdOf(this.options.instanceId));
    let running = false;
    try {
      const description = await withDeadline(deadlineMs, handle.describe());
      running = description.status.name === 'RUNNING' && description.runId === this.leaseRunId;
    } catch (e) {
      if (!(e instanceof WorkflowNotFoundError)) throw e;
    }
    if (running) {
      this.confirmedAt = Date.now();
      return;
    }
    // Declared lost (or the lease run was ended by someone): nothing is ours until we have joined again.
    this.confirmedAt = 0;
    this.log.warn({ instanceId: this.options.instanceId }, 'this instance was declared lost; joining again');
    await withDeadline(2 * deadlineMs, this.join());
  }
}

import { Client, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { withDeadline } from '@libs/runtime';
import type { LeaseStore } from '@libs/storage';
import {
  assignmentQuery,
  AssignmentView,
  COORDINATOR_WORKFLOW_ID,
  drainUpdate,
  moveUpdate,
  parsePartitionKey,
  partitionKeyOf,
  PartitionMove,
  PartitionStatus,
  partitionStatusQuery,
  partitionWorkflowIdOf,
} from '../../contracts';

export interface PartitionView {
  topic: string;
  partition: number;
  /** The owner the coordinator assigned. */
  owner: string | null;
  /** The epoch of the owner's current run (from its partition workflow). */
  epoch: number | null;
  /**
   * Whether that run polls: its workflow started it, and it claimed the partition's lease in Postgres under that
   * epoch. A run scheduled but not started (its instance runs its most partitions,
   * EVENTMESH_DELIVERY_MAX_OWNED_PARTITIONS) claims nothing and polls nothing.
   */
  polling: boolean;
  /** The lowest offset some subscription has not settled, and the events behind the log end, as last reported. */
  committedOffset: number | null;
  lag: number | null;
  delivered: number | null;
  progressAt: string | null;
  /** What Postgres holds: the epoch writes are checked against, its last renewal, and writes refused as stale. */
  lease: { owner: string | null; epoch: number; renewedAt: string | null; rejectedWrites: number } | null;
}

export interface PartitionsView {
  members: string[];
  drained: string[];
  pins: Record<string, string>;
  generation: number;
  partitions: PartitionView[];
}

const QUERY_DEADLINE_MS = 5000;

/**
 * Ends every running workflow of PARTITION_OWNED_PULL in the client's namespace (coordinator, partition owners,
 * instance leases): no members, no assignment. For tests and benchmarks that need a clean start; never while
 * instances run.
 */
export async function endOwnershipWorkflows(client: Client, reason: string): Promise<void> {
  const query = `WorkflowType IN ('coordinatorWorkflow', 'partitionWorkflow', 'instanceLeaseWorkflow') AND ExecutionStatus = 'Running'`;
  const ids: string[] = [];
  for await (const w of client.workflow.list({ query })) ids.push(w.workflowId);
  await Promise.all(
    ids.map((id) =>
      client.workflow
        .getHandle(id)
        .terminate(reason)
        .catch(() => undefined),
    ),
  );
}

/** What `/admin/partitions` and the drain and move endpoints do: queries and updates of the ownership workflows. */
export class OwnershipAdmin {
  constructor(
    private readonly client: Client,
    private readonly leases: LeaseStore,
  ) {}

  async partitions(): Promise<PartitionsView> {
    let view: AssignmentView;
    try {
      view = await withDeadline(
        QUERY_DEADLINE_MS,
        this.client.workflow.getHandle(COORDINATOR_WORKFLOW_ID).query(assignmentQuery),
      );
    } catch (e) {
      if (e instanceof WorkflowNotFoundError)
        return { members: [], drained: [], pins: {}, generation: 0, partitions: [] };
      // No worker answered the query in time (each is down, paused, or busy replaying), or Temporal refused it: the
      // request may be repeated, and the reason is the answer's (a 503, not an opaque 500).
      throw new EventMeshError(
        ErrorCode.DependencyUnavailable,
        `the coordinator workflow did not answer the assignment query: ${(e as Error).message}; try again`,
        { dependency: 'temporal', retryAfterSeconds: 1 },
        true,
        { cause: e },
      );
    }
    const keys = Object.keys(view.owners).sort();
    const leases = new Map((await this.leases.list()).map((l) => [partitionKeyOf(l.topic, l.partition), l]));
    const statuses = await Promise.all(
      keys.map(async (key) => {
        const { topic, partition } = parsePartitionKey(key);
        const handle = this.client.workflow.getHandle(partitionWorkflowIdOf(topic, partition));
        return withDeadline(QUERY_DEADLINE_MS, handle.query(partitionStatusQuery)).catch(
          (): PartitionStatus | undefined => undefined,
        );
      }),
    );
    return {
      members: view.members,
      drained: view.drained,
      pins: view.pins,
      generation: view.generation,
      partitions: keys.map((key, i) => {
        const { topic, partition } = parsePartitionKey(key);
        const status = statuses[i];
        const lease = leases.get(key);
        const owner = view.owners[key] ?? null;
        return {
          topic,
          partition,
          owner,
          epoch: status?.epoch ?? null,
          polling:
            status?.polling === true && lease !== undefined && lease.owner === owner && lease.epoch === status.epoch,
          committedOffset: status?.committedOffset ?? null,
          lag: status?.lag ?? null,
          delivered: status?.delivered ?? null,
          progressAt: status?.progressAt ?? null,
          lease: lease
            ? {
                owner: lease.owner,
                epoch: lease.epoch,
                renewedAt: lease.renewedAt?.toISOString() ?? null,
                rejectedWrites: lease.rejectedWrites,
              }
            : null,
        };
      }),
    };
  }

  /** Moves every partition away from an instance (or lets it own partitions again); answers with the moves. */
  drain(instanceId: string, drained: boolean): Promise<PartitionMove[]> {
    return this.update(() =>
      this.client.workflow
        .getHandle(COORDINATOR_WORKFLOW_ID)
        .executeUpdate(drainUpdate, { args: [{ instanceId, drained }] }),
    );
  }

  /** Moves one partition to a named instance, gracefully; answers with the moves. */
  move(topic: string, partition: number, to: string): Promise<PartitionMove[]> {
    return this.update(() =>
      this.client.workflow
        .getHandle(COORDINATOR_WORKFLOW_ID)
        .executeUpdate(moveUpdate, { args: [{ partition: partitionKeyOf(topic, partition), to }] }),
    );
  }

  private async update(run: () => Promise<PartitionMove[]>): Promise<PartitionMove[]> {
    try {
      return await run();
    } catch (e) {
      if (e instanceof WorkflowUpdateFailedError) {
        const reason = e.cause instanceof Error ? e.cause.message : e.message;
        throw new EventMeshError(ErrorCode.OwnershipConflict, reason);
      }
      if (e instanceof WorkflowNotFoundError) {
        throw new EventMeshError(
          ErrorCode.OwnershipConflict,
          'no partition owner has joined yet (the coordinator is not running)',
        );
      }
      throw e;
    }
  }
}

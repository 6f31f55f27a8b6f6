import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  allHandlersFinished,
  condition,
  getExternalWorkflowHandle,
  makeContinueAsNewFunc,
  setHandler,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { assignPartitions, movedPartitions } from './assignment';
import {
  assignmentQuery,
  AssignmentView,
  assignOwnerSignal,
  CoordinatorInput,
  CoordinatorState,
  controlWorkflowTaskTimeoutMs,
  drainUpdate,
  joinSignal,
  leaveSignal,
  moveUpdate,
  partitionKeyOf,
  PartitionMove,
  parsePartitionKey,
  partitionWorkflowIdOf,
  searchAttributes,
} from '../contracts';
import { partitionWorkflow } from './partition.workflow';

const MAX_HISTORY_EVENTS = 2000;

/**
 * The one coordinator of PARTITION_OWNED_PULL, id `eventmesh-coordinator`. It holds the membership (instances
 * join with the run id of their lease workflow; that workflow reports them lost or stopped) and the assignment
 * `topic#partition -> owner`, recomputed with {@link assignPartitions} on every change, so only the partitions
 * needed to rebalance move. It starts each partition's workflow once and signals it when its owner changes:
 * gracefully when the old owner is alive (join, drain, operator move), at once when it is gone. Operators drain
 * an instance or move a partition through updates, which answer with the moves they caused.
 */
export async function coordinatorWorkflow(input: CoordinatorInput): Promise<void> {
  const state: CoordinatorState = input.state ?? {
    members: {},
    drained: [],
    pins: {},
    partitions: [],
    assignment: {},
    started: [],
    generation: 0,
  };
  let dirty = false;
  let lastMoves: PartitionMove[] = [];
  /** Set while a round (recompute and hand over) runs: a change made meanwhile is applied by the next round. */
  let roundInProgress = false;
  /** Instances that left cleanly since the last round: their partitions move gracefully (their loops commit first). */
  let stoppedSinceRound: string[] = [];

  setHandler(joinSignal, (join) => {
    state.members[join.instanceId] = { leaseRunId: join.leaseRunId };
    state.partitions = [...new Set([...state.partitions, ...join.partitions])].sort();
    dirty = true;
  });
  setHandler(leaveSignal, (leave) => {
    // A notice from an older lease run of an instance that has joined again since changes nothing.
    if (state.members[leave.instanceId]?.leaseRunId !== leave.leaseRunId) return;
    delete state.members[leave.instanceId];
    if (leave.reason === 'stopped') stoppedSinceRound.push(leave.instanceId);
    dirty = true;
  });
  setHandler(
    drainUpdate,
    async ({ instanceId, drained }) => {
      state.drained = drained
        ? [...new Set([...state.drained, instanceId])].sort()
        : state.drained.filter((d) => d !== instanceId);
      if (drained) for (const [p, to] of Object.entries(state.pins)) if (to === instanceId) delete state.pins[p];
      return applied();
    },
    {
      validator: ({ instanceId, drained }) => {
        if (typeof instanceId !== 'string' || typeof drained !== 'boolean')
          throw new Error('expected { instanceId: string, drained: boolean }');
        if (drained && !(instanceId in state.members)) throw new Error(`instance ${instanceId} is not a member`);
      },
    },
  );
  setHandler(
    moveUpdate,
    async ({ partition, to }) => {
      state.pins[partition] = to;
      return applied();
    },
    {
      validator: ({ partition, to }) => {
        if (!state.partitions.includes(partition)) throw new Error(`unknown partition ${partition}`);
        if (!(to in state.members)) throw new Error(`instance ${to} is not a member`);
        if (state.drained.includes(to)) throw new Error(`instance ${to} is drained`);
      },
    },
  );
  setHandler(assignmentQuery, (): AssignmentView => ({
    members: Object.keys(state.members).sort(),
    drained: state.drained,
    pins: state.pins,
    owners: Object.fromEntries(state.partitions.map((p) => [p, state.assignment[p] ?? null])),
    generation: state.generation,
  }));

  /** Marks the state changed and waits for the main loop to apply it; answers with the moves it caused. */
  async function applied(): Promise<PartitionMove[]> {
    dirty = true;
    const target = state.generation + (roundInProgress ? 2 : 1);
    await condition(() => state.generation >= target);
    return lastMoves;
  }

  for (;;) {
    await condition(() => dirty);
    dirty = false;
    roundInProgress = true;
    const stopped = stoppedSinceRound;
    stoppedSinceRound = [];
    // Pins to instances that left lapse.
    for (const [p, to] of Object.entries(state.pins)) if (!(to in state.members)) delete state.pins[p];
    const next = assignPartitions({
      partitions: state.partitions,
      eligible: Object.keys(state.members).filter((m) => !state.drained.includes(m)),
      current: state.assignment,
      pins: state.pins,
    });
    const moves = movedPartitions(state.assignment, next).map((p) => ({
      partition: p,
      from: state.assignment[p],
      to: next[p],
    }));
    const before = state.assignment;
    state.assignment = next;
    const alive = (owner: string | undefined) =>
      owner !== undefined && (owner in state.members || stopped.includes(owner));
    await Promise.all(moves.map((m) => handOver(m, alive(before[m.partition]))));
    lastMoves = moves;
    state.generation++;
    roundInProgress = false;
    const info = workflowInfo();
    if (!dirty && (info.continueAsNewSuggested || info.historyLength > (input.maxHistoryEvents ?? MAX_HISTORY_EVENTS)))
      break;
  }
  await condition(allHandlersFinished);
  // The next run gets this version's task timeout even when the first run was started without it.
  await makeContinueAsNewFunc<typeof coordinatorWorkflow>({
    workflowTaskTimeout: controlWorkflowTaskTimeoutMs(input.leaseTtlMs),
  })({ ...input, state });

  async function handOver(move: PartitionMove, graceful: boolean): Promise<void> {
    const { topic, partition } = parsePartitionKey(move.partition);
    const workflowId = partitionWorkflowIdOf(topic, partition);
    if (!state.started.includes(move.partition)) {
      if (await start(topic, partition, move.to)) return;
      // Started by an earlier coordinator (this one was reset): it is told like any other.
      state.started.push(move.partition);
    }
    try {
      await getExternalWorkflowHandle(workflowId).signal(assignOwnerSignal, { owner: move.to, graceful });
    } catch {
      // The partition workflow was ended from outside (an operator terminated it): start it again.
      await start(topic, partition, move.to);
    }
  }

  /** Starts a partition workflow; false when one with its id is already running. */
  async function start(topic: string, partition: number, owner: string | undefined): Promise<boolean> {
    try {
      await startChild(partitionWorkflow, {
        workflowId: partitionWorkflowIdOf(topic, partition),
        args: [{ topic, partition, leaseTtlMs: input.leaseTtlMs, runMs: input.runMs, owner, epoch: 0 }],
        parentClosePolicy: 'ABANDON',
        workflowTaskTimeout: controlWorkflowTaskTimeoutMs(input.leaseTtlMs),
        typedSearchAttributes: [
          { key: searchAttributes.topic, value: topic },
          { key: searchAttributes.partition, value: partition },
        ],
      });
      const key = partitionKeyOf(topic, partition);
      if (!state.started.includes(key)) state.started.push(key);
      return true;
    } catch (e) {
      if (e instanceof WorkflowExecutionAlreadyStartedError) return false;
      throw e;
    }
  }
}

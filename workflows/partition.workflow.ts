import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import {
  allHandlersFinished,
  CancellationScope,
  condition,
  makeContinueAsNewFunc,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { OwnershipActivities } from '../contracts';
import {
  assignOwnerSignal,
  controlWorkflowTaskTimeoutMs,
  EPOCH_BEHIND,
  instanceTaskQueueOf,
  partitionProgressSignal,
  PartitionProgress,
  PartitionStatus,
  partitionStatusQuery,
  searchAttributes,
} from '../contracts';

/**
 * One per `topic#partition` in PARTITION_OWNED_PULL, id `partition/<topic>/<partition>`, started by the
 * coordinator. It keeps the partition's poll-and-dispatch activity running on its owner's task queue, with
 * `heartbeatTimeout` equal to the lease TTL, and gives every run an epoch: a run after a clean return reuses
 * it, any other start raises it. The activity claims that epoch in Postgres before it polls, and every write it
 * makes is conditional on it, so a run this workflow gave up on (a heartbeat timeout does not stop a process)
 * can change nothing once a newer run claimed the partition.
 *
 * A new owner arrives by signal from the coordinator. A planned move cancels the old run and waits (bounded by
 * the TTL) for it to settle, park and commit, so the new owner starts at the committed offset; a move away from a
 * lost owner starts the new run at once. Events never pass through here, only offsets and counts. The workflow
 * continues as new before its history grows large.
 */
export interface PartitionWorkflowInput {
  topic: string;
  partition: number;
  leaseTtlMs: number;
  /** How long one activity run lasts before it returns and is started again. */
  runMs: number;
  owner?: string;
  /** The last epoch given to a run. */
  epoch: number;
  /** Set when the run with `epoch` returned cleanly on this owner: the next run there may keep the epoch. */
  cleanOwner?: string;
  delivered?: number;
  ownerChanges?: number;
  progress?: PartitionProgress;
  /** Runs per execution before continue-as-new (default 100). */
  runsPerExecution?: number;
}

const RUNS_PER_EXECUTION = 100;
const MAX_HISTORY_EVENTS = 1000;
const MAX_FAILURE_BACKOFF_MS = 10_000;

export async function partitionWorkflow(input: PartitionWorkflowInput): Promise<void> {
  const { topic, partition, leaseTtlMs } = input;
  let owner = input.owner;
  let graceful = true;
  let epoch = input.epoch;
  let cleanOwner = input.cleanOwner;
  let delivered = input.delivered ?? 0;
  let ownerChanges = input.ownerChanges ?? 0;
  let progress = input.progress;
  let polling = false;
  let lastFailure: string | undefined;
  let deliveredBeforeRun = delivered;

  setHandler(assignOwnerSignal, (assign) => {
    if (assign.owner === owner) return;
    owner = assign.owner;
    graceful = assign.graceful;
  });
  setHandler(partitionProgressSignal, (p) => {
    if (p.epoch !== epoch) return; // from a run this workflow already gave up on
    progress = p;
    delivered = deliveredBeforeRun + p.delivered;
  });
  setHandler(partitionStatusQuery, (): PartitionStatus => ({
    topic,
    partition,
    owner,
    epoch,
    polling,
    committedOffset: progress?.committedOffset,
    lag: progress?.lag,
    delivered,
    progressAt: progress?.reportedAt,
    ownerChanges,
    lastFailure,
  }));

  let failures = 0;
  for (let run = 0; run < (input.runsPerExecution ?? RUNS_PER_EXECUTION); run++) {
    const info = workflowInfo();
    if (info.continueAsNewSuggested || info.historyLength > MAX_HISTORY_EVENTS) break;
    await condition(() => owner !== undefined);
    const target = owner!;
    const runEpoch = cleanOwner === target ? epoch : epoch + 1;
    epoch = runEpoch;
    cleanOwner = undefined;
    upsertSearchAttributes([
      { key: searchAttributes.owner, value: target },
      { key: searchAttributes.epoch, value: runEpoch },
    ]);
    const { pollPartition } = proxyActivities<OwnershipActivities>({
      taskQueue: instanceTaskQueueOf(target),
      heartbeatTimeout: leaseTtlMs,
      startToCloseTimeout: input.runMs + 3 * leaseTtlMs,
      retry: { maximumAttempts: 1 },
      cancellationType: 'WAIT_CANCELLATION_COMPLETED',
    });

    deliveredBeforeRun = delivered;
    polling = true;
    const runScope = new CancellationScope();
    const pollRun = runScope.run(() =>
      pollPartition({ topic, partition, owner: target, epoch: runEpoch, runMs: input.runMs }),
    );
    const watchScope = new CancellationScope();
    const moved = watchScope.run(() => condition(() => owner !== target));
    const outcome = await Promise.race([
      pollRun.then(
        () => ({ kind: 'returned' as const }),
        (error: unknown) => ({ kind: 'failed' as const, error }),
      ),
      moved.then(() => ({ kind: 'moved' as const })),
    ]);
    watchScope.cancel();
    moved.catch(() => undefined);

    if (outcome.kind === 'moved') {
      ownerChanges++;
      runScope.cancel();
      const settled = pollRun.catch(() => undefined);
      // A planned move waits for the old owner to commit; a lost owner has nothing to wait for (the epoch fences it).
      if (graceful) await Promise.race([settled, sleep(2 * leaseTtlMs)]);
    } else if (outcome.kind === 'returned') {
      cleanOwner = target;
      failures = 0;
      lastFailure = undefined;
    } else {
      failures++;
      lastFailure = describe(outcome.error);
      const behind = epochBehind(outcome.error);
      if (behind !== undefined) epoch = Math.max(epoch, behind);
      // Back off before the next start on the same owner; a new owner ends the wait.
      const wait = Math.min(MAX_FAILURE_BACKOFF_MS, 500 * 2 ** Math.min(failures - 1, 10));
      if (behind === undefined) await condition(() => owner !== target, wait);
    }
    polling = false;
  }
  await condition(allHandlersFinished);
  await makeContinueAsNewFunc<typeof partitionWorkflow>({
    workflowTaskTimeout: controlWorkflowTaskTimeoutMs(leaseTtlMs),
  })({
    ...input,
    owner,
    epoch,
    cleanOwner,
    delivered,
    ownerChanges,
    progress,
  });
}

function failureCause(error: unknown): unknown {
  return error instanceof ActivityFailure ? error.cause : error;
}

function describe(error: unknown): string {
  const cause = failureCause(error);
  if (cause instanceof Error) return `${cause.name}: ${cause.message}`;
  return String(cause);
}

/** The epoch Postgres holds, when the run failed because its epoch was not above it. */
function epochBehind(error: unknown): number | undefined {
  const cause = failureCause(error);
  if (cause instanceof ApplicationFailure && cause.type === EPOCH_BEHIND) {
    const current = (cause.details?.[0] as { current?: number } | undefined)?.current;
    return typeof current === 'number' ? current : undefined;
  }
  return undefined;
}

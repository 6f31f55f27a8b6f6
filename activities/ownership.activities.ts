import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { DispatchLoop, DispatchProgress, isFenced } from '@libs/delivery';
import { runFenced, type WriteFence } from '@libs/fence';
import type { LeaseStore } from '@libs/storage';
import {
  EPOCH_BEHIND,
  FENCED,
  LEASE_RUN_ENDED,
  OwnershipActivities,
  PartitionProgress,
  PollPartitionInput,
  PollPartitionResult,
  WRONG_INSTANCE,
} from '../contracts';

export interface PartitionLoopScope {
  topic: string;
  partition: number;
  fence: WriteFence;
  /** False while the loop must neither fetch nor deliver (its lease is not confirmed). */
  gate: () => boolean;
}

export interface OwnershipActivityDeps {
  instanceId: string;
  /** The heartbeat timeout of these activities; heartbeats go out at least three times within it. */
  leaseTtlMs: number;
  /** Aborted when the instance shuts down. */
  shutdownSignal: AbortSignal;
  leases: LeaseStore;
  /** The instance's membership, as OwnershipAgent confirms it with Temporal. */
  membership: {
    /** The lease run the instance holds now. */
    currentLeaseRun(): string | undefined;
    /** Confirmed within the lease window, and still under that lease run. */
    confirmedFor(leaseRunId: string | undefined): boolean;
  };
  /** A loop for one partition, with its own Kafka connection (a broker answers one connection's fetches in turn). */
  openPartitionLoop(scope: PartitionLoopScope): Promise<{ loop: DispatchLoop; close(): Promise<void> }>;
  /**
   * The partition runs this instance's worker runs at once (its activity slots, the setting of the same name);
   * one more slot holds the instance lease.
   */
  maxOwnedPartitions: number;
  /** Tells the partition's workflow the run's offsets and counts (best effort). */
  reportProgress(topic: string, partition: number, progress: PartitionProgress): Promise<void>;
}

/**
 * The activities of PARTITION_OWNED_PULL, on the instance's own task queue.
 *
 * `holdInstanceLease` heartbeats for as long as the instance lives: its heartbeat timeout is the instance's lease.
 *
 * `pollPartition` is the poll-and-dispatch loop of one partition under one epoch. It claims the epoch in Postgres
 * first, then renews it there every fifth of the TTL with a write conditional on the epoch: a refused renewal or
 * any refused write means a newer owner holds the partition, and the run stops. It fetches and delivers only
 * while both the instance's membership (Temporal) and its epoch (Postgres) were confirmed within half a TTL, so
 * an owner that is cut off, or was paused past the TTL, stops before a successor starts and sends nothing when it
 * wakes. Cancellation (a planned move) stops polling, settles or parks what is in flight, commits, and returns.
 * The claim, the clock and the refusals are `runFenced`'s (libs/fence); the claim check and the gate are this run's.
 */
export function createOwnershipActivities(deps: OwnershipActivityDeps): OwnershipActivities {
  const beatEveryMs = Math.max(200, Math.min(1000, Math.floor(deps.leaseTtlMs / 5)));
  const windowMs = Math.floor(deps.leaseTtlMs / 2);
  /** How often a run renews its epoch in Postgres: two or more renewals per window. */
  const renewEveryMs = Math.floor(deps.leaseTtlMs / 5);

  function checkInstance(instanceId: string) {
    if (instanceId !== deps.instanceId) {
      throw ApplicationFailure.nonRetryable(
        `this worker is instance ${deps.instanceId}, not ${instanceId}`,
        WRONG_INSTANCE,
      );
    }
  }

  /** Partition runs going on now, and whether reaching the most was said (once until it falls below). */
  let running = 0;
  let saidFull = false;

  /** One run of one partition (pollPartition, within its slot). */
  async function pollOne(input: PollPartitionInput): Promise<PollPartitionResult> {
    checkInstance(input.owner);
    const { topic, partition, epoch } = input;
    const ctx = Context.current();
    ctx.heartbeat();
    let epochConfirmedAt = 0;
    // A run belongs to the lease run under which it first saw the instance joined: if the instance is declared
    // lost and joins again, this run stays closed (its partition moved away meanwhile).
    let leaseRun = deps.membership.currentLeaseRun();
    const gate = () => {
      leaseRun ??= deps.membership.currentLeaseRun();
      return deps.membership.confirmedFor(leaseRun) && Date.now() - epochConfirmedAt < windowMs;
    };
    // Its gate never opens again once the instance holds a newer lease run, confirmed. The run then ends, and the
    // workflow starts the next one if the partition is still this instance's: a run that started before the
    // instance heard the answer to its join (it was declared lost and joined again, and the coordinator gave the
    // partition back at once) is not left holding it shut for the rest of its run.
    const superseded = new AbortController();
    const checkLeaseRun = () => {
      const current = deps.membership.currentLeaseRun();
      if (
        leaseRun !== undefined &&
        current !== undefined &&
        current !== leaseRun &&
        deps.membership.confirmedFor(current)
      )
        superseded.abort();
    };

    let reportedAt = 0;
    let reported: string | undefined;
    const report = (p: DispatchProgress): PartitionProgress => ({
      epoch,
      committedOffset: p.committedOffset,
      highWatermark: p.highWatermark,
      lag: p.lag,
      delivered: p.delivered,
      subscriptions: p.subscriptions,
      reportedAt: new Date().toISOString(),
    });
    const reportNews = (progress: DispatchProgress) => {
      const key = `${progress.committedOffset}/${progress.lag}/${progress.delivered}/${progress.subscriptions}`;
      if (Date.now() - reportedAt >= deps.leaseTtlMs && key !== reported && gate()) {
        reportedAt = Date.now();
        reported = key;
        deps.reportProgress(topic, partition, report(progress)).catch(() => undefined);
      }
    };

    const progress = await runFenced<DispatchProgress>({
      scope: { kind: 'partition', topic, partition },
      log: ctx.log,
      async claim() {
        const claim = await deps.leases.claim(topic, partition, input.owner, epoch);
        if (!claim.claimed) {
          throw ApplicationFailure.nonRetryable(
            `epoch ${epoch} of ${topic}#${partition} is not above epoch ${claim.current} held by ${claim.owner ?? 'nobody'}`,
            EPOCH_BEHIND,
            { current: claim.current },
          );
        }
        epochConfirmedAt = Date.now();
        return epoch;
      },
      fenceFor: (claimed) => deps.leases.fenceFor(topic, partition, claimed),
      async open({ fence, stop }) {
        const { loop, close } = await deps.openPartitionLoop({ topic, partition, fence, gate });
        return {
          onBeat() {
            checkLeaseRun();
            reportNews(loop.snapshot);
          },
          heartbeat: () => ctx.heartbeat({ epoch, ...loop.snapshot, gateOpen: gate() }),
          lastRoundAt: () => loop.lastRoundAt,
          run: () => loop.run(stop, Date.now() + input.runMs, () => undefined),
          close: () => close().catch(() => undefined),
        };
      },
      stop: AbortSignal.any([ctx.cancellationSignal, deps.shutdownSignal, superseded.signal]),
      beatEveryMs,
      leaseTtlMs: deps.leaseTtlMs,
      // A loop stuck for a whole TTL (a hung dependency) loses its heartbeat, and the workflow starts it afresh;
      // the renewal goes on, since it is what keeps the gate open once the loop moves again.
      renewal: {
        renew: (claimed) => deps.leases.renew(topic, partition, claimed),
        everyMs: renewEveryMs,
        meansAlive: false,
        // Counted from the question: an answer that waited out a pause is not fresh.
        onHeld: (askedAt) => (epochConfirmedAt = Math.max(epochConfirmedAt, askedAt)),
      },
      isFenced,
      fenced: ({ message }) => {
        throw ApplicationFailure.nonRetryable(message, FENCED);
      },
    });
    if (superseded.signal.aborted) {
      throw ApplicationFailure.nonRetryable(
        `this run of ${topic}#${partition} belongs to lease run ${leaseRun}; the instance holds ${deps.membership.currentLeaseRun()} now`,
        LEASE_RUN_ENDED,
      );
    }
    await deps.reportProgress(topic, partition, report(progress)).catch(() => undefined);
    if (ctx.cancellationSignal.aborted) {
      ctx.log.info('partition run cancelled after committing its progress', {
        topic,
        partition,
        epoch,
        delivered: progress.delivered,
      });
      await ctx.cancelled;
    }
    return {
      delivered: progress.delivered,
      committedOffset: progress.committedOffset,
      stoppedBy: deps.shutdownSignal.aborted ? 'shutdown' : 'deadline',
    };
  }

  return {
    async holdInstanceLease(input: { instanceId: string }): Promise<{ stoppedBy: 'shutdown' | 'cancelled' }> {
      checkInstance(input.instanceId);
      const ctx = Context.current();
      const stop = AbortSignal.any([ctx.cancellationSignal, deps.shutdownSignal]);
      while (!stop.aborted) {
        ctx.heartbeat();
        await sleep(beatEveryMs, undefined, { signal: stop }).catch(() => undefined);
      }
      return { stoppedBy: deps.shutdownSignal.aborted ? 'shutdown' : 'cancelled' };
    },

    async pollPartition(input: PollPartitionInput): Promise<PollPartitionResult> {
      // Each run holds one of the worker's activity slots (maxOwnedPartitions) for as long as it runs: at the
      // limit, a partition assigned beyond it waits in the task queue, unpolled. Said at once, in the log.
      if (++running >= deps.maxOwnedPartitions && !saidFull) {
        saidFull = true;
        Context.current().log.error(
          `instance ${deps.instanceId} runs ${running} partitions, its most (EVENTMESH_DELIVERY_MAX_OWNED_PARTITIONS): a partition assigned to it beyond these waits unpolled until one ends; raise the setting or add instances`,
          { running, maxOwnedPartitions: deps.maxOwnedPartitions },
        );
      }
      try {
        return await pollOne(input);
      } finally {
        if (--running < deps.maxOwnedPartitions) saidFull = false;
      }
    },
  };
}

import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { DispatchLoop, isFenced } from '@libs/delivery';
import type { WriteFence } from '@libs/storage';
import {
  DISPATCH_RUN_FENCED,
  type DispatchActivities,
  type DispatchProgress,
  type DispatchRunInput,
  type DispatchRunResult,
} from '../contracts';

export interface DispatchActivityDeps {
  instanceId: string;
  /** The instance's dispatch runs (DispatchRunStore): each attempt claims the next epoch and renews it. */
  runs: {
    claim(instanceId: string, owner: string): Promise<number>;
    renew(instanceId: string, epoch: number): Promise<boolean>;
    fenceFor(instanceId: string, epoch: number): WriteFence;
  };
  /** A fresh loop per run, every write of it through `fence`: every run starts from the offsets committed in Postgres. */
  createLoop(fence: WriteFence): DispatchLoop;
  /** Aborted when the instance shuts down: the run commits what it delivered and returns at once. */
  shutdownSignal: AbortSignal;
  /** The heartbeat timeout of this activity; heartbeats go out at least three times within it. */
  leaseTtlMs: number;
}

/**
 * The poll-and-dispatch activity. Each attempt first claims the next epoch of the instance's dispatch run in
 * Postgres, and its loop makes every write through the fence of that epoch: an older attempt still running (its
 * heartbeat withheld, or an old process) is refused its next write and stops, so two loops of one instance never
 * both write. A refused write, or a refused renewal, fails the attempt retryably ({@link DISPATCH_RUN_FENCED}):
 * Temporal starts a fresh one, which claims a newer epoch. While its loop is alive the attempt renews the epoch
 * (`renewed_at`, which a takeover of orphaned subscriptions reads as liveness) every fifth of the lease TTL, on
 * the same clock as its heartbeat, which carries the loop's progress (rounds, delivered, lag). An instance
 * shutdown or a cancellation stops the loop after it committed what it delivered, except the SDK's own local
 * timeout ({@link stoppingCancellation}): the loop needs no Temporal, so a link to Temporal that stops answering
 * does not stop delivery.
 */
export function createDispatchActivities(deps: DispatchActivityDeps): DispatchActivities {
  const tickMs = Math.max(100, Math.floor(deps.leaseTtlMs / 5));
  return {
    async pollAndDispatch(input: DispatchRunInput): Promise<DispatchRunResult> {
      if (input.instanceId !== deps.instanceId) {
        throw ApplicationFailure.nonRetryable(
          `this worker is instance ${deps.instanceId}, not ${input.instanceId}`,
          'WrongInstance',
        );
      }
      const ctx = Context.current();
      ctx.heartbeat();
      const owner = `${deps.instanceId}@${process.pid} attempt ${ctx.info.attempt}`;
      const epoch = await deps.runs.claim(deps.instanceId, owner);
      ctx.log.info('dispatch run claimed', { epoch, owner });
      const fenced = new AbortController();
      let refusedRenewal: string | undefined;
      const cancelled = stoppingCancellation(ctx);
      const stop = AbortSignal.any([cancelled, deps.shutdownSignal, fenced.signal]);
      const loop = deps.createLoop(deps.runs.fenceFor(deps.instanceId, epoch));
      // One clock for the heartbeat and the renewal, and only while the loop is alive: a loop stuck for a whole
      // lease TTL (a hung dependency) loses both, Temporal starts the activity afresh, and a takeover sees it.
      // When the renewal in flight started (0: none), and whether its slowness was reported: one renewal at a time.
      let renewingSince = 0;
      let slowRenewalReported = false;
      const beat = setInterval(() => {
        if (Date.now() - loop.lastRoundAt >= deps.leaseTtlMs) {
          ctx.log.warn('dispatch loop made no round within a lease TTL; withholding the heartbeat and the renewal');
          return;
        }
        ctx.heartbeat({ epoch, ...loop.snapshot });
        if (renewingSince !== 0) {
          // Every statement has a deadline (libs/storage/postgres-connection.ts); a renewal pending past a lease TTL
          // means something waits outside one, and takeovers read this run as dead meanwhile: say so.
          if (!slowRenewalReported && Date.now() - renewingSince >= deps.leaseTtlMs) {
            slowRenewalReported = true;
            ctx.log.warn('dispatch run renewal pending for more than a lease TTL', {
              epoch,
              pendingMs: Date.now() - renewingSince,
            });
          }
          return;
        }
        renewingSince = Date.now();
        slowRenewalReported = false;
        deps.runs
          .renew(deps.instanceId, epoch)
          .then((held) => {
            if (held) return;
            refusedRenewal = `the dispatch run of instance ${deps.instanceId} moved past epoch ${epoch}; its renewal was refused`;
            fenced.abort();
          })
          .catch((e: unknown) => ctx.log.warn('dispatch run renewal failed', { epoch, error: (e as Error).message }))
          .finally(() => (renewingSince = 0));
      }, tickMs);
      let progress: DispatchProgress;
      try {
        // The clock above is the one heartbeat: rounds come many times a second and need not each report.
        progress = await loop.run(stop, Date.now() + input.runMs, () => undefined);
      } catch (e) {
        if (isFenced(e)) throw ApplicationFailure.retryable((e as Error).message, DISPATCH_RUN_FENCED, { epoch });
        throw e;
      } finally {
        clearInterval(beat);
      }
      if (refusedRenewal) throw ApplicationFailure.retryable(refusedRenewal, DISPATCH_RUN_FENCED, { epoch });
      if (cancelled.aborted) {
        ctx.log.info('dispatch run cancelled after committing its progress', { ...progress });
        await ctx.cancelled;
      }
      return { ...progress, stoppedBy: deps.shutdownSignal.aborted ? 'shutdown' : 'deadline' };
    },
  };
}

/**
 * Aborts when a cancellation of the attempt must stop its loop: the workflow cancelled it, the server no longer
 * knows it (a heartbeat answered `NotFound`: a newer attempt is coming), or the worker shuts down. Not when the
 * SDK timed the attempt out by itself: its local timer (the heartbeat timeout plus a buffer) restarts only when a
 * heartbeat call to Temporal completes, so a link that drops packets (no answer and no error until the HTTP/2
 * keepalive gives up, about a minute later) cancels a healthy attempt a few seconds past its heartbeat timeout,
 * and over that same dead link no new attempt can reach the worker to take over (docs/failure-matrix.md). The loop goes on under its epoch instead: if
 * Temporal has started another attempt meanwhile, that attempt's claim fences this loop at its next write, so two
 * loops never both write.
 */
export function stoppingCancellation(ctx: Context): AbortSignal {
  const stop = new AbortController();
  const onCancel = () => {
    if (ctx.cancellationDetails?.timedOut) {
      ctx.log.warn(
        'Temporal confirmed no heartbeat within the heartbeat timeout and the SDK timed this dispatch attempt out; its loop goes on until a newer attempt fences it',
      );
      return;
    }
    stop.abort(ctx.cancellationSignal.reason);
  };
  if (ctx.cancellationSignal.aborted) onCancel();
  else ctx.cancellationSignal.addEventListener('abort', onCancel, { once: true });
  return stop.signal;
}

import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { DispatchLoop, isFenced } from '@libs/delivery';
import { runFenced, type WriteFence } from '@libs/fence';
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
 * the same clock as its heartbeat, which carries the loop's progress (rounds, delivered, lag): the steps of
 * `runFenced` (libs/fence), which every fenced loop shares. An instance shutdown or a cancellation stops the loop
 * after it committed what it delivered, except the SDK's own local timeout ({@link stoppingCancellation}): the
 * loop needs no Temporal, so a link to Temporal that stops answering does not stop delivery.
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
      const cancelled = stoppingCancellation(ctx);
      const progress = await runFenced<DispatchProgress>({
        scope: { kind: 'dispatch-run', instanceId: deps.instanceId },
        log: ctx.log,
        async claim() {
          const epoch = await deps.runs.claim(deps.instanceId, owner);
          ctx.log.info('dispatch run claimed', { epoch, owner });
          return epoch;
        },
        fenceFor: (epoch) => deps.runs.fenceFor(deps.instanceId, epoch),
        open({ epoch, fence, stop }) {
          const loop = deps.createLoop(fence);
          return {
            heartbeat: () => ctx.heartbeat({ epoch, ...loop.snapshot }),
            lastRoundAt: () => loop.lastRoundAt,
            // The run's clock is the one heartbeat: rounds come many times a second and need not each report.
            run: () => loop.run(stop, Date.now() + input.runMs, () => undefined),
          };
        },
        stop: AbortSignal.any([cancelled, deps.shutdownSignal]),
        beatEveryMs: tickMs,
        leaseTtlMs: deps.leaseTtlMs,
        // A loop stuck for a whole lease TTL (a hung dependency) loses both the heartbeat and the renewal: Temporal
        // starts the activity afresh, and a takeover sees it.
        renewal: { renew: (epoch) => deps.runs.renew(deps.instanceId, epoch), meansAlive: true },
        isFenced,
        fenced({ epoch, message }) {
          throw ApplicationFailure.retryable(message, DISPATCH_RUN_FENCED, { epoch });
        },
      });
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

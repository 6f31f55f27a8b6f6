import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { DispatchLoop, DispatchProgress } from '../libs/delivery';

export interface DispatchRunInput {
  instanceId: string;
  /** How long this run dispatches before it returns. */
  runMs: number;
}

export interface DispatchRunResult extends DispatchProgress {
  stoppedBy: 'deadline' | 'shutdown';
}

export interface DispatchActivityDeps {
  instanceId: string;
  /** A fresh loop per run: every run starts from the offsets committed in Postgres. */
  createLoop(): DispatchLoop;
  /** Aborted when the instance shuts down: the run commits what it delivered and returns at once. */
  shutdownSignal: AbortSignal;
  /** The heartbeat timeout of this activity; heartbeats go out at least three times within it. */
  leaseTtlMs: number;
}

/**
 * The poll-and-dispatch activity. Its heartbeat carries the loop's progress (rounds, delivered, lag), which the
 * Temporal UI shows on the pending activity; an instance shutdown or a cancellation stops the loop after it
 * committed what it delivered.
 */
export function createDispatchActivities(deps: DispatchActivityDeps) {
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
      const stop = AbortSignal.any([ctx.cancellationSignal, deps.shutdownSignal]);
      const loop = deps.createLoop();
      // Heartbeat on a clock, not only per round, but only while the loop is alive: a loop stuck for a whole
      // lease TTL (a hung dependency) loses its heartbeat, and Temporal starts the activity afresh.
      const beat = setInterval(() => {
        if (Date.now() - loop.lastRoundAt < deps.leaseTtlMs) ctx.heartbeat(loop.snapshot);
        else ctx.log.warn('dispatch loop made no round within a lease TTL; withholding the heartbeat');
      }, Math.max(500, Math.floor(deps.leaseTtlMs / 3)));
      let progress;
      try {
        // The clock above is the one heartbeat: rounds come many times a second and need not each report.
        progress = await loop.run(stop, Date.now() + input.runMs, () => undefined);
      } finally {
        clearInterval(beat);
      }
      if (ctx.cancellationSignal.aborted) {
        ctx.log.info('dispatch run cancelled after committing its progress', { ...progress });
        await ctx.cancelled;
      }
      return { ...progress, stoppedBy: deps.shutdownSignal.aborted ? 'shutdown' : 'deadline' };
    },
  };
}

export type DispatchActivities = ReturnType<typeof createDispatchActivities>;

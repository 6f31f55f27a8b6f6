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
      const progress = await deps.createLoop().run(stop, Date.now() + input.runMs, (p) => ctx.heartbeat(p));
      if (ctx.cancellationSignal.aborted) {
        ctx.log.info('dispatch run cancelled after committing its progress', { ...progress });
        await ctx.cancelled;
      }
      return { ...progress, stoppedBy: deps.shutdownSignal.aborted ? 'shutdown' : 'deadline' };
    },
  };
}

export type DispatchActivities = ReturnType<typeof createDispatchActivities>;

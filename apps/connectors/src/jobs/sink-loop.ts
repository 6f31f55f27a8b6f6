import type { BatchItem, BatchOutcome } from '@eventmesh/client';
import { StaleEpochError } from '@libs/fence';
import type { PutOutcome, SinkConnector } from '../spi';
import type { NewDeadLetter } from '../store/job-run-store';
import { backoffMs, noteError, pause, RunContext } from './run-context';

/** Deliveries held at once: the subscription's window (the runtime's most). */
const WINDOW = 1000;
/**
 * Deliveries written in one batch, at most: half the window, so the other half arrives while a batch is written
 * (a batch of the whole window left the stream nothing to send until its answers came).
 */
export const WRITE_MAX = WINDOW / 2;
/**
 * Events written in one batch, at most, from a batched subscription (`config.batch`: a delivery is a batch, one
 * place of the window): two of its batches, up to this.
 */
export const BATCHED_WRITE_MAX = 1000;

/** The events one write takes at most: two of a batched subscription's batches (read at the start), else WRITE_MAX. */
export async function writeMaxOf(mesh: RunContext['mesh'], subscriptionId: string): Promise<number> {
  try {
    const batch = ((await mesh.subscriptions.get(subscriptionId)).config as { batch?: { maxEvents?: unknown } }).batch;
    return typeof batch?.maxEvents === 'number' ? Math.min(BATCHED_WRITE_MAX, 2 * batch.maxEvents) : WRITE_MAX;
  } catch {
    // Not readable (the consume below says why, if it is not the subscription's): half the window.
    return WRITE_MAX;
  }
}

/**
 * A sink job's loop: consume the job's STREAM subscription through the SDK's batch handler (its own dedupe off:
 * the sink's ledger is the dedupe, in the target's transaction), write the deliveries that arrive together in one
 * `put`, record the counts and the dead letters under the run's fence, then answer each delivery: written (or
 * already written) is acked; a permanent failure is rejected (the subscription's dead letters, and the job's); a
 * transient one is nacked and redelivered after the nack delay, so a failing target is retried at that pace, never in a spin. A
 * commit that fails (not refused) is tried again with backoff before the batch is answered, so written rows are
 * counted. A fence refusal ends the run at once: nothing more is put to the target, and its unanswered deliveries
 * are given back and redelivered to the next run. A stream
 * that cannot connect is the job's last error; one refused for good (the subscription is not the job tenant's, or
 * is gone; the credential is refused) ends the run with that error, and the workflow runs it again after its
 * retry backoff.
 */
export async function runSink(sink: SinkConnector, subscriptionId: string, ctx: RunContext): Promise<void> {
  let stale: StaleEpochError | undefined;
  let refused: Error | undefined;
  // Aborted when the run must end for a reason of its own (fenced off by a write, refused for good): wakes the loop.
  const ended = new AbortController();
  const stopped = AbortSignal.any([ctx.signal, ended.signal]);

  // One batch written at a time: what arrives while it is written is the next batch (a group commit, up to
  // WRITE_MAX, or two of a batched subscription's batches), so a busy stream makes few large transactions and fenced
  // commits rather than many small ones.
  const write = async (batch: BatchItem[]): Promise<BatchOutcome[]> => {
    // Fenced off: the job is another run's, whose deliveries these are; nothing more is written to the target.
    if (stale) throw stale;
    try {
      const outcomes = await sink.put(batch.map((b) => b.event));
      const deadLetters = outcomes.flatMap((o, i) =>
        !o.ok && o.permanent
          ? [{ reason: o.reason, record: batch[i].event.toJSON(), key: deadLetterKeyOf(batch[i].event) }]
          : [],
      );
      const moved = outcomes.filter((o) => o.ok && o.written).length;
      const recorded = await commitRetrying(ctx, { moved, deadLetters });
      ctx.progress.moved += moved;
      ctx.progress.deadLettered += recorded.deadLettered;
      const failed = outcomes.find((o): o is Extract<PutOutcome, { ok: false }> => !o.ok && !o.permanent);
      await noteError(ctx, failed?.reason);
      return outcomes.map((o) => (o.ok ? 'ack' : o.permanent ? { reject: o.reason } : { nack: true }));
    } catch (e) {
      // Nothing of the batch is known written (or its counts committed): every event comes again.
      if (e instanceof StaleEpochError) {
        stale ??= e;
        ended.abort();
      } else await noteError(ctx, (e as Error).message);
      throw e;
    }
  };

  const consumer = ctx.mesh.consumeBatches(subscriptionId, write, {
    dedupe: false,
    window: WINDOW,
    maxBatchEvents: await writeMaxOf(ctx.mesh, subscriptionId),
    nackDelayMs: 1000,
    batchFrames: true,
  });
  consumer.on('state', ({ state, error }) => {
    if (!error) return;
    void noteError(ctx, `subscription ${subscriptionId}: ${error.message}`);
    if (state === 'closed') {
      refused = error;
      ended.abort();
    }
  });
  try {
    while (!stopped.aborted) await pause(1000, stopped);
  } finally {
    // Fenced off (a write or the renewal refused): the unanswered deliveries are given back at once, for the run
    // that holds the job now; otherwise those in hand are written and answered first.
    await (stale || ctx.fencedOff.aborted ? consumer.close() : consumer.drain());
  }
  if (stale) throw stale;
  if (refused) throw refused;
}

/**
 * Commits a written batch's counts and dead letters under the fence, tried again after a failure (the target
 * database or this one briefly away) with backoff while the run goes on: the batch is written, so its deliveries
 * are answered only once its counts are committed, and a batch given back for a failed commit alone would come
 * again as "already written" and never be counted. A fence refusal, or the run ending, throws.
 */
async function commitRetrying(
  ctx: RunContext,
  round: { moved: number; deadLetters: NewDeadLetter[] },
): Promise<{ deadLettered: number }> {
  for (let failures = 1; ; failures++) {
    try {
      return await ctx.runs.commit(ctx.fence, ctx.jobId, round);
    } catch (e) {
      if (e instanceof StaleEpochError || ctx.signal.aborted) throw e;
      await noteError(ctx, `commit: ${(e as Error).message}`);
      await pause(backoffMs(failures), ctx.signal);
      if (ctx.signal.aborted) throw e;
    }
  }
}

/** A dead letter's key: the event's source and id (refused again, it adds no letter); Postgres text holds no NUL. */
export const deadLetterKeyOf = (event: { source: string; id: string }): string =>
  JSON.stringify([event.source, event.id]);

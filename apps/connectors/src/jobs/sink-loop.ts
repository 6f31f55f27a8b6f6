import { RejectError, type CloudEvent } from '@eventmesh/client';
import { StaleEpochError } from '@libs/fence';
import type { PutOutcome, SinkConnector } from '../spi';
import { noteError, pause, RunContext } from './run-context';

/** Deliveries held at once: the subscription's window (the runtime's most). */
const WINDOW = 1000;
/**
 * Deliveries written in one batch, at most: half the window, so the other half arrives while a batch is written
 * (a batch of the whole window left the stream nothing to send until its answers came).
 */
export const WRITE_MAX = WINDOW / 2;

/**
 * A sink job's loop: consume the job's STREAM subscription through the SDK (its own dedupe off: the sink's ledger
 * is the dedupe, in the target's transaction), write the deliveries that arrive together in one `put`, record the
 * counts and the dead letters under the run's fence, then answer each delivery: written (or already written) is
 * acked; a permanent failure is rejected (the subscription's dead letters, and the job's); a transient one is
 * nacked and redelivered after the nack delay, so a failing target is retried at that pace, never in a spin. A
 * fence refusal ends the run; its unanswered deliveries are given back and redelivered to the next run. A stream
 * that cannot connect is the job's last error; one refused for good (the subscription is not the job tenant's, or
 * is gone; the credential is refused) ends the run with that error, and the workflow runs it again after its
 * retry backoff.
 */
export async function runSink(sink: SinkConnector, subscriptionId: string, ctx: RunContext): Promise<void> {
  let stale: StaleEpochError | undefined;
  const pending: { event: CloudEvent<unknown>; answer: (o: PutOutcome | Error) => void }[] = [];
  let scheduled = false;
  let writing = false;

  // One batch written at a time: what arrives while it is written waits and is the next batch (a group commit, up
  // to WRITE_MAX), so a busy stream makes few large transactions and fenced commits rather than many small ones.
  const flush = async () => {
    scheduled = false;
    if (writing || pending.length === 0) return;
    writing = true;
    const batch = pending.splice(0, WRITE_MAX);
    try {
      await write(batch);
    } finally {
      writing = false;
      if (pending.length) void flush();
    }
  };

  const write = async (batch: typeof pending) => {
    let outcomes: PutOutcome[];
    try {
      outcomes = await sink.put(batch.map((b) => b.event));
      const deadLetters = outcomes.flatMap((o, i) =>
        !o.ok && o.permanent ? [{ reason: o.reason, record: batch[i].event.toJSON() }] : [],
      );
      const moved = outcomes.filter((o) => o.ok && o.written).length;
      await ctx.runs.commit(ctx.fence, ctx.jobId, { moved, deadLetters });
      ctx.progress.moved += moved;
      ctx.progress.deadLettered += deadLetters.length;
      const failed = outcomes.find((o): o is Extract<PutOutcome, { ok: false }> => !o.ok && !o.permanent);
      ctx.progress.lastError = failed?.reason;
    } catch (e) {
      if (e instanceof StaleEpochError) stale = e;
      batch.forEach((b) => b.answer(e as Error));
      return;
    }
    batch.forEach((b, i) => b.answer(outcomes[i]));
  };

  const consumer = ctx.mesh.consume(
    subscriptionId,
    async (event) => {
      const outcome = await new Promise<PutOutcome | Error>((answer) => {
        pending.push({ event, answer });
        if (pending.length >= WRITE_MAX) void flush();
        else if (!scheduled) {
          scheduled = true;
          setImmediate(() => void flush());
        }
      });
      if (outcome instanceof Error) throw outcome;
      if (outcome.ok) return;
      if (outcome.permanent) throw new RejectError(outcome.reason);
      throw new Error(outcome.reason);
    },
    { dedupe: false, window: WINDOW, concurrency: WINDOW, nackDelayMs: 1000, batchFrames: true },
  );
  let refused: Error | undefined;
  consumer.on('state', ({ state, error }) => {
    if (!error) return;
    void noteError(ctx, `subscription ${subscriptionId}: ${error.message}`);
    if (state === 'closed') refused = error;
  });
  try {
    while (!ctx.signal.aborted && !stale && !refused) await pause(1000, ctx.signal);
  } finally {
    // Fenced off (a write or the renewal refused): the unanswered deliveries are given back at once, for the run
    // that holds the job now; otherwise those in hand are written and answered first.
    await (stale || ctx.fencedOff.aborted ? consumer.close() : consumer.drain());
  }
  if (stale) throw stale;
  if (refused) throw refused;
}

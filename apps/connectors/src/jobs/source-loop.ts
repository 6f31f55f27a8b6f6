import { StaleEpochError } from '@libs/fence';
import type { NewDeadLetter } from '../store/job-run-store';
import type { SourceConnector } from '../spi';
import { PublishLanes } from './publish-lanes';
import { backoffMs, noteError, pause, RunContext } from './run-context';

/** How long a source that found nothing waits before it polls again. */
export const IDLE_MS = 50;
/** Polls read ahead of the committed position, at most: published or being published, not yet committed. */
export const POLLS_AHEAD = 4;

/** One poll on its way: published (or being published), committed once it and every poll before it were acknowledged. */
interface Pending {
  position: string;
  records: number;
  /** Set when the runtime acknowledged every record of it: the dead letters among them. */
  deadLetters?: NewDeadLetter[];
}

/**
 * A source job's loop: poll after the committed position, publish the records through the SDK (each publish
 * retried until the runtime acknowledged it, with the record's own event id), then commit the position after them
 * under the run's fence, then let the source forget them. A crash anywhere before the commit repeats the records
 * from the committed position: the same rows, the same event ids, which the SDK's dedupe and every consumer drop.
 * A record that cannot become an event (the source says why, or the runtime refuses it for what it is: 400/404)
 * is committed as a dead letter with the position past it, and the job goes on. A write refused by the fence
 * (another run holds the job) ends the run.
 *
 * The three steps overlap: the loop polls up to {@link POLLS_AHEAD} times ahead of the committed position while
 * earlier polls are published (several requests in flight, see PublishLanes) and committed. The position committed
 * is that of the last poll of the acknowledged run from the committed position: a poll acknowledged before an
 * earlier one waits for it, so the position never passes a record not yet acknowledged. A failure (a publish, a
 * poll, a commit) ends the round once nothing is in flight, and the next round reads from the committed position.
 */
export async function runSource(source: SourceConnector, batchSize: number, ctx: RunContext): Promise<void> {
  let failures = 0;
  while (!ctx.signal.aborted) {
    try {
      // Every round reads from the stored position, not the last one this run saw committed: a commit whose answer
      // was lost (the connection dropped after COMMIT) moved it, and reading again before it would publish its
      // records again and record their dead letters (which have no key) and counts twice.
      ctx.progress.position = await ctx.runs.position(ctx.jobId);
      await pump(source, batchSize, ctx, () => (failures = 0));
    } catch (e) {
      if (e instanceof StaleEpochError) throw e;
      await noteError(ctx, (e as Error).message);
      await pause(backoffMs(++failures), ctx.signal);
    }
  }
}

/** One round: polls, publishes and commits until the run must end (returns) or something failed (throws). */
async function pump(source: SourceConnector, batchSize: number, ctx: RunContext, succeeded: () => void) {
  const lanes = new PublishLanes(ctx.mesh);
  const pending: Pending[] = [];
  const failed = new AbortController();
  let reading = true;
  let change = wakeable();
  const changed = () => {
    change.wake();
    change = wakeable();
  };
  const fail = (e: unknown) => {
    if (!failed.signal.aborted) failed.abort(e);
    changed();
  };
  ctx.signal.addEventListener('abort', changed);

  const read = async () => {
    let position = ctx.progress.position;
    while (!ctx.signal.aborted && !failed.signal.aborted) {
      if (pending.length >= POLLS_AHEAD) {
        await change.promise;
        continue;
      }
      const poll = await source.poll(position, batchSize);
      if (poll.position === undefined) {
        if (pending.length === 0) await noteError(ctx, undefined);
        await Promise.race([pause(IDLE_MS, ctx.signal), change.promise]);
        continue;
      }
      const entry: Pending = { position: poll.position, records: poll.records.length };
      lanes.publish(poll.records).then((deadLetters) => {
        entry.deadLetters = deadLetters;
        changed();
      }, fail);
      pending.push(entry);
      position = poll.position;
      changed();
    }
  };

  // Commits what was acknowledged, in poll order, until the reader stopped and nothing is pending (or a failure).
  const commit = async () => {
    while (!failed.signal.aborted && (reading || pending.length > 0)) {
      if (pending[0]?.deadLetters === undefined) {
        await change.promise;
        continue;
      }
      let n = 0;
      while (n < pending.length && pending[n].deadLetters !== undefined) n++;
      const done = pending.slice(0, n);
      const deadLetters = done.flatMap((p) => p.deadLetters!);
      const moved = done.reduce((sum, p) => sum + p.records, 0) - deadLetters.length;
      const position = done[n - 1].position;
      const recorded = await ctx.runs.commit(ctx.fence, ctx.jobId, { position, moved, deadLetters });
      pending.splice(0, n);
      ctx.progress.position = position;
      ctx.progress.moved += moved;
      ctx.progress.deadLettered += recorded.deadLettered;
      succeeded();
      changed();
      await noteError(ctx, undefined);
      await source
        .committed?.(position)
        .catch((e: Error) =>
          ctx.log.warn({ jobId: ctx.jobId, error: e.message }, 'published rows not deleted; the next round retries'),
        );
    }
  };

  try {
    await Promise.all([
      read()
        .catch(fail)
        .finally(() => {
          reading = false;
          changed();
        }),
      commit().catch(fail),
    ]);
  } finally {
    ctx.signal.removeEventListener('abort', changed);
    // Nothing of this round may still be publishing when the next one reads the same records again.
    await lanes.settled();
  }
  if (failed.signal.aborted) throw failed.signal.reason;
}

/** A promise and the function that resolves it. */
function wakeable(): { promise: Promise<void>; wake: () => void } {
  let wake!: () => void;
  const promise = new Promise<void>((resolve) => (wake = resolve));
  return { promise, wake };
}

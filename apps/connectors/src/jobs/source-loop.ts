import {
  EventMeshError,
  NotFoundError,
  PayloadTooLargeError,
  ValidationError,
  type EventMeshClient,
} from '@eventmesh/client';
import { StaleEpochError } from '../../../../libs/fence';
import type { NewDeadLetter } from '../store/job-run-store';
import type { SourceConnector, SourceRecord } from '../spi';
import { backoffMs, noteError, pause, RunContext } from './run-context';

/** How long a source that found nothing waits before it polls again. */
const IDLE_MS = 200;

/**
 * A source job's loop: poll after the committed position, publish the records through the SDK (each publish
 * retried until the runtime acknowledged it, with the record's own event id), then commit the position after them
 * under the run's fence, then let the source forget them. A crash anywhere before the commit repeats the records
 * from the committed position: the same rows, the same event ids, which the SDK's dedupe and every consumer drop.
 * A record that cannot become an event (the source says why, or the runtime refuses it for what it is: 400/404)
 * is committed as a dead letter with the position past it, and the job goes on. A write refused by the fence
 * (another run holds the job) ends the run.
 */
export async function runSource(source: SourceConnector, batchSize: number, ctx: RunContext): Promise<void> {
  let position = await ctx.runs.position(ctx.jobId);
  ctx.progress.position = position;
  let failures = 0;
  while (!ctx.signal.aborted) {
    try {
      const poll = await source.poll(position, batchSize);
      if (poll.position === undefined) {
        if (!(await ctx.runs.renew(ctx.jobId, ctx.progress.epoch)))
          throw new StaleEpochError({ kind: 'connector-job', jobId: ctx.jobId }, ctx.progress.epoch, undefined);
        await noteError(ctx, undefined);
        await pause(IDLE_MS, ctx.signal);
        continue;
      }
      const deadLetters = await publish(ctx.mesh, poll.records);
      const moved = poll.records.length - deadLetters.length;
      await ctx.runs.commit(ctx.fence, ctx.jobId, { position: poll.position, moved, deadLetters });
      position = poll.position;
      ctx.progress.position = position;
      ctx.progress.moved += moved;
      ctx.progress.deadLettered += deadLetters.length;
      failures = 0;
      await noteError(ctx, undefined);
      await source
        .committed?.(position)
        .catch((e: Error) =>
          ctx.log.warn({ jobId: ctx.jobId, error: e.message }, 'published rows not deleted; the next round retries'),
        );
    } catch (e) {
      if (e instanceof StaleEpochError) throw e;
      await noteError(ctx, (e as Error).message);
      await pause(backoffMs(++failures), ctx.signal);
    }
  }
}

/**
 * Publishes every valid record, by topic, and answers the dead letters: the invalid ones, and those the runtime
 * refused for what they are. A batch the runtime refuses is published one event at a time to find which.
 * Anything else (the runtime unreachable, the credential refused) throws: the round is tried again.
 */
export async function publish(mesh: EventMeshClient, records: SourceRecord[]): Promise<NewDeadLetter[]> {
  const deadLetters: NewDeadLetter[] = [];
  const byTopic = new Map<string, Extract<SourceRecord, { ok: true }>[]>();
  for (const r of records) {
    if (!r.ok) deadLetters.push({ reason: r.reason, record: r.raw });
    else byTopic.set(r.topic, [...(byTopic.get(r.topic) ?? []), r]);
  }
  for (const [topic, batch] of byTopic) {
    try {
      await mesh.publishMany(
        batch.map((r) => r.event),
        { topic },
      );
    } catch (e) {
      if (!refusedForWhatItIs(e)) throw e;
      for (const r of batch) {
        try {
          await mesh.publish(r.event, { topic });
        } catch (one) {
          if (!refusedForWhatItIs(one)) throw one;
          deadLetters.push({ reason: `${(one as EventMeshError).code}: ${(one as Error).message}`, record: r });
        }
      }
    }
  }
  return deadLetters;
}

/**
 * The runtime refused the event itself (invalid, too large, or a topic the job's tenant has not: another tenant's
 * topic is a 404), not the caller (401/403) or the moment (429/503).
 */
function refusedForWhatItIs(e: unknown): boolean {
  return e instanceof ValidationError || e instanceof NotFoundError || e instanceof PayloadTooLargeError;
}

import { createLogger } from '@libs/logging';
import type { OffsetPosition } from '@libs/storage';
import type { DispatchContext } from './dispatch-context';
import type { Lane } from './lane';

/**
 * Offsets are committed at most this often while the loop runs (and always when it stops or a lane closes): one
 * statement for every lane that moved, whatever the rate. A crash redelivers at most this long of deliveries.
 */
export const COMMIT_INTERVAL_MS = 200;

/** Raised when Postgres refuses an offset commit for an older epoch: a newer owner holds the partition now. */
export class FencedError extends Error {
  constructor(readonly rejected: { subscriptionId: string; topic: string; partition: number; reason: string }[]) {
    super(`offset commit rejected for ${rejected.length} subscription partition(s): ${rejected[0]?.reason}`);
    this.name = 'FencedError';
  }
}

/**
 * Moves the stored offsets of the lanes over what they settled, in one statement through the loop's fence.
 *
 * What a refusal means: `STALE_EPOCH` (a partition lease moved on) fences the loop ({@link FencedError}).
 * `SUBSCRIPTION_GONE` closes the lane. `SEEKED` (an operator's seek wrote the row after the lane started) closes the
 * lane too, without its position counting; the loop's next refresh starts it from the new offsets. `BACKWARDS` is not a fence (the loop's fence was checked in the same
 * transaction, so no newer run wrote it): the row is already past the lane, moved by a writer that settled those
 * events (an operator, or a run of another instance before the subscription moved here). The lane takes the stored
 * offset as committed, so it neither moves the row back nor asks again, and goes on delivering from where it is: the
 * events in between may reach the sink twice, none is skipped, and its next commit past the row applies.
 */
export class OffsetCommitter {
  private readonly log = createLogger('DispatchLoop');
  private committedAt = 0;

  constructor(private readonly ctx: DispatchContext) {}

  /** Commits if the last commit is {@link COMMIT_INTERVAL_MS} old. */
  async tick(): Promise<void> {
    if (Date.now() - this.committedAt < COMMIT_INTERVAL_MS) return;
    this.committedAt = Date.now();
    await this.commit();
  }

  /** One statement for every lane (of `lanes`, else all) that moved since the last commit. */
  async commit(lanes: Iterable<Lane> = this.ctx.lanes.values()): Promise<void> {
    const { ctx } = this;
    const moved = [...lanes].filter((l) => l.nextOffset > l.committed);
    if (moved.length === 0) return;
    const positions: OffsetPosition[] = moved.map((l) => ({
      subscriptionId: l.subscription.id,
      topic: l.topic,
      partition: l.partition,
      nextOffset: l.nextOffset,
      epoch: ctx.fence.rowEpoch,
      generation: l.generation,
    }));
    const results = await ctx.fence.run((m) => ctx.deps.offsets.commit(positions, m));
    const fenced: FencedError['rejected'] = [];
    results.forEach((r, i) => {
      const lane = moved[i];
      if (r.applied) lane.committed = r.position.nextOffset;
      else if (r.rejected === 'SUBSCRIPTION_GONE') ctx.lanes.close(lane);
      else if (r.rejected === 'SEEKED') {
        // An operator moved the offsets since this lane started: what it settled no longer counts; the next refresh
        // starts it again from the new offsets.
        ctx.lanes.close(lane);
        this.log.info(
          {
            subscription: lane.subscription.id,
            topic: lane.topic,
            partition: lane.partition,
            at: lane.nextOffset,
            generation: lane.generation,
          },
          'the offsets were moved by a seek since this lane started; lane closed, it restarts from the new offsets',
        );
      } else if (r.rejected === 'BACKWARDS' && r.current) {
        ctx.progress.commitsBehind++;
        lane.committed = r.current.nextOffset;
        this.log.warn(
          {
            subscription: lane.subscription.id,
            topic: lane.topic,
            partition: lane.partition,
            at: lane.nextOffset,
            stored: r.current.nextOffset,
          },
          'the stored offset is already past this lane; keeping it, and delivering on from the lane (events in between may be delivered twice)',
        );
      } else
        fenced.push({
          subscriptionId: lane.subscription.id,
          topic: lane.topic,
          partition: lane.partition,
          reason: r.rejected!,
        });
    });
    ctx.progress.committedAt = new Date().toISOString();
    if (fenced.length > 0) throw new FencedError(fenced);
  }
}

import type { OffsetPosition } from '../storage';
import type { DispatchContext } from './dispatch-context';
import type { Lane } from './lane';

/**
 * Offsets are committed at most this often while the loop runs (and always when it stops or a lane closes): one
 * statement for every lane that moved, whatever the rate. A crash redelivers at most this long of deliveries.
 */
export const COMMIT_INTERVAL_MS = 200;

/** Raised when Postgres refuses an offset commit: another owner holds the subscription partition now. */
export class FencedError extends Error {
  constructor(readonly rejected: { subscriptionId: string; topic: string; partition: number; reason: string }[]) {
    super(`offset commit rejected for ${rejected.length} subscription partition(s): ${rejected[0]?.reason}`);
    this.name = 'FencedError';
  }
}

/** Moves the stored offsets of the lanes over what they settled, in one statement through the loop's fence. */
export class OffsetCommitter {
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
      epoch: ctx.fence.epoch,
    }));
    const results = await ctx.fence.run((m) => ctx.deps.offsets.commit(positions, m));
    const fenced: FencedError['rejected'] = [];
    results.forEach((r, i) => {
      const lane = moved[i];
      if (r.applied) lane.committed = r.position.nextOffset;
      else if (r.rejected === 'SUBSCRIPTION_GONE') ctx.lanes.close(lane);
      else fenced.push({ subscriptionId: lane.subscription.id, topic: lane.topic, partition: lane.partition, reason: r.rejected! });
    });
    ctx.progress.committedAt = new Date().toISOString();
    if (fenced.length > 0) throw new FencedError(fenced);
  }
}

import type { DataSource } from 'typeorm';
import { EpochFence, WriteFence } from '@libs/fence';

export interface DispatchRunRow {
  instanceId: string;
  epoch: number;
  owner: string | null;
  claimedAt: Date | null;
  renewedAt: Date | null;
  rejectedWrites: number;
}

/**
 * The `dispatch_runs` table: the epochs of LOCAL_STICKY_PULL, one row per instance. Every start of an instance's
 * poll-and-dispatch activity claims the next epoch (there is no contest: the newest run always wins), and every
 * write of its loop runs behind {@link fenceFor}, so an older run that still works (a retried attempt while the
 * old one hangs, an old process after a restart) can no longer write anything. Moving a subscription off an
 * instance takes the next epoch too, in the same transaction as the move, which fences the run that delivered
 * it: `UPDATE dispatch_runs SET epoch = epoch + 1 WHERE instance_id = <old>` waits for a fenced write in flight,
 * and refuses every one after it. (Lock `dispatch_runs` before the `subscriptions` rows in such a transaction;
 * a fenced write locks them in that order, so the reverse could deadlock.) The run renews `renewed_at` while it
 * is alive: what a takeover reads as the instance's liveness.
 */
export class DispatchRunStore {
  private readonly fence: EpochFence<string>;

  /** `waitLimitMs` bounds every wait of a dispatch-run transaction (see {@link EpochFence}): half the lease TTL. */
  constructor(
    private readonly db: DataSource,
    waitLimitMs = 5000,
  ) {
    this.fence = new EpochFence(
      db,
      {
        table: 'dispatch_runs',
        keyColumns: ['instance_id'],
        keyValues: (instanceId) => [instanceId],
        scopeOf: (instanceId) => ({ kind: 'dispatch-run', instanceId }),
        // The fence is the row lock in the transaction; an offset row may move between instances.
        rowsCarryEpoch: false,
      },
      waitLimitMs,
    );
  }

  /**
   * Takes the next epoch of the instance's dispatch run (1 for the first run) for `owner`, and returns it. Waits
   * for a fenced write in flight under the previous epoch; every write under an older epoch is refused after.
   */
  claim(instanceId: string, owner: string): Promise<number> {
    return this.fence.claim(instanceId, owner);
  }

  /** Records that the run under `epoch` is alive; false (and counted) when a newer run, or a takeover, moved the epoch on. */
  renew(instanceId: string, epoch: number): Promise<boolean> {
    return this.fence.renew(instanceId, epoch);
  }

  /** A fence for the writes of the instance's dispatch run under `epoch`. */
  fenceFor(instanceId: string, epoch: number): WriteFence {
    return this.fence.fenceFor(instanceId, epoch);
  }

  async get(instanceId: string): Promise<DispatchRunRow | undefined> {
    const rows: {
      instance_id: string;
      epoch: string;
      owner: string | null;
      claimed_at: Date | null;
      renewed_at: Date | null;
      rejected_writes: string;
    }[] = await this.db.query(
      `SELECT instance_id, epoch, owner, claimed_at, renewed_at, rejected_writes FROM dispatch_runs WHERE instance_id = $1`,
      [instanceId],
    );
    const r = rows[0];
    if (!r) return undefined;
    return {
      instanceId: r.instance_id,
      epoch: Number(r.epoch),
      owner: r.owner,
      claimedAt: r.claimed_at,
      renewedAt: r.renewed_at,
      rejectedWrites: Number(r.rejected_writes),
    };
  }
}

import type { DataSource } from 'typeorm';
import { EpochFence, WriteFence } from './epoch-fence';

export type ClaimResult = { claimed: true } | { claimed: false; current: number; owner: string | null };

export interface LeaseRow {
  topic: string;
  partition: number;
  owner: string | null;
  epoch: number;
  renewedAt: Date | null;
  rejectedWrites: number;
}

/**
 * The `partition_leases` table, where the epochs of PARTITION_OWNED_PULL are enforced. A run claims its epoch
 * before it polls (only a higher epoch wins, or the same owner's own epoch again); from then on every write it
 * makes to the partition's state runs in a transaction that first locks the lease row and checks the epoch, so a
 * claim by a newer owner and a stale owner's write cannot interleave. A refused write is counted on the row.
 */
export class LeaseStore {
  private readonly fence: EpochFence<{ topic: string; partition: number }>;

  /** `waitLimitMs` bounds every wait of a lease transaction (see {@link EpochFence}): half the lease TTL. */
  constructor(
    private readonly db: DataSource,
    waitLimitMs = 5000,
  ) {
    this.fence = new EpochFence(db, {
      table: 'partition_leases',
      keyColumns: ['topic', 'partition'],
      keyValues: (k) => [k.topic, k.partition],
      scopeOf: (k) => ({ kind: 'partition', topic: k.topic, partition: k.partition }),
      rowsCarryEpoch: true,
    }, waitLimitMs);
  }

  async claim(topic: string, partition: number, owner: string, epoch: number): Promise<ClaimResult> {
    const rows: { epoch: string; owner: string | null; claimed: boolean }[] = await this.fence.transaction((manager) =>
      manager.query(
      `WITH claimed AS (
         INSERT INTO partition_leases AS l (topic, partition, owner, epoch, renewed_at, updated_at)
         VALUES ($1, $2, $3, $4, now(), now())
         ON CONFLICT (topic, partition) DO UPDATE
           SET owner = EXCLUDED.owner, epoch = EXCLUDED.epoch, renewed_at = now(), updated_at = now()
           WHERE l.epoch < EXCLUDED.epoch OR (l.epoch = EXCLUDED.epoch AND l.owner = EXCLUDED.owner)
         RETURNING l.epoch, l.owner
       )
       SELECT epoch, owner, true AS claimed FROM claimed
       UNION ALL
       SELECT epoch, owner, false FROM partition_leases
        WHERE topic = $1 AND partition = $2 AND NOT EXISTS (SELECT 1 FROM claimed)`,
        [topic, partition, owner, epoch],
      ),
    );
    const row = rows[0];
    if (row?.claimed) return { claimed: true };
    return { claimed: false, current: Number(row?.epoch ?? 0), owner: row?.owner ?? null };
  }

  /** Records that the owner under `epoch` is alive; false (and counted) when a newer owner holds the partition. */
  renew(topic: string, partition: number, epoch: number): Promise<boolean> {
    return this.fence.renew({ topic, partition }, epoch);
  }

  /** A fence for the writes of one partition under one epoch. */
  fenceFor(topic: string, partition: number, epoch: number): WriteFence {
    return this.fence.fenceFor({ topic, partition }, epoch);
  }

  async list(topics?: string[]): Promise<LeaseRow[]> {
    const rows: { topic: string; partition: number; owner: string | null; epoch: string; renewed_at: Date | null; rejected_writes: string }[] =
      await this.db.query(
        `SELECT topic, partition, owner, epoch, renewed_at, rejected_writes FROM partition_leases
          WHERE $1::text[] IS NULL OR topic = ANY($1::text[]) ORDER BY topic, partition`,
        [topics ?? null],
      );
    return rows.map((r) => ({
      topic: r.topic,
      partition: r.partition,
      owner: r.owner,
      epoch: Number(r.epoch),
      renewedAt: r.renewed_at,
      rejectedWrites: Number(r.rejected_writes),
    }));
  }
}

import type { DataSource } from 'typeorm';
import { EpochFence, WriteFence } from '@libs/fence';

export type ClaimResult = { claimed: true } | { claimed: false; current: number; owner: string | null };

/** One renewal waiting for its batch. */
interface RenewalAsk {
  topic: string;
  partition: number;
  epoch: number;
  resolve(held: boolean): void;
  reject(e: unknown): void;
}

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

  /** Renewals asked and not yet sent (a timer sends them). */
  private batch?: RenewalAsk[];

  /**
   * `waitLimitMs` bounds every wait of a lease transaction (see {@link EpochFence}): half the lease TTL.
   * `renewBatchMs`: how long a renewal waits for others to go with it (0: each alone).
   */
  constructor(
    private readonly db: DataSource,
    waitLimitMs = 5000,
    private readonly renewBatchMs = 0,
  ) {
    this.fence = new EpochFence(
      db,
      {
        table: 'partition_leases',
        keyColumns: ['topic', 'partition'],
        keyValues: (k) => [k.topic, k.partition],
        scopeOf: (k) => ({ kind: 'partition', topic: k.topic, partition: k.partition }),
        rowsCarryEpoch: true,
      },
      waitLimitMs,
    );
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

  /**
   * Records that the owner under `epoch` is alive; false (and counted) when a newer owner holds the partition.
   * The renewals of an instance's partitions asked within `renewBatchMs` of the first go to Postgres as one
   * statement: an instance renews each partition it owns every fifth of the TTL, and alone each renewal was a
   * transaction of its own (hundreds a second for an instance owning hundreds of partitions).
   */
  renew(topic: string, partition: number, epoch: number): Promise<boolean> {
    if (this.renewBatchMs <= 0) return this.fence.renew({ topic, partition }, epoch);
    return new Promise<boolean>((resolve, reject) => {
      if (!this.batch) {
        this.batch = [];
        setTimeout(() => void this.renewBatch(), this.renewBatchMs);
      }
      this.batch.push({ topic, partition, epoch, resolve, reject });
    });
  }

  /** The renewals asked since the batch opened, in one statement; each answered with its own row's outcome. */
  private async renewBatch(): Promise<void> {
    const asks = this.batch ?? [];
    this.batch = undefined;
    try {
      const renewed: { topic: string; partition: number; epoch: string }[] = await this.fence.transaction(
        async (manager) => {
          const [rows] = (await manager.query(
            `UPDATE partition_leases l SET renewed_at = now()
             FROM unnest($1::text[], $2::int[], $3::bigint[]) AS r(topic, partition, epoch)
            WHERE l.topic = r.topic AND l.partition = r.partition AND l.epoch = r.epoch
            RETURNING l.topic, l.partition, l.epoch`,
            [asks.map((a) => a.topic), asks.map((a) => a.partition), asks.map((a) => a.epoch)],
          )) as [{ topic: string; partition: number; epoch: string }[], number];
          return rows;
        },
      );
      const held = new Set(renewed.map((r) => `${r.topic}#${r.partition}#${r.epoch}`));
      const refused = asks.filter((a) => !held.has(`${a.topic}#${a.partition}#${a.epoch}`));
      if (refused.length > 0) {
        await this.db.query(
          `UPDATE partition_leases l SET rejected_writes = rejected_writes + r.n
             FROM (SELECT topic, partition, count(*)::int AS n FROM unnest($1::text[], $2::int[]) AS u(topic, partition) GROUP BY 1, 2) r
            WHERE l.topic = r.topic AND l.partition = r.partition`,
          [refused.map((a) => a.topic), refused.map((a) => a.partition)],
        );
      }
      for (const a of asks) a.resolve(held.has(`${a.topic}#${a.partition}#${a.epoch}`));
    } catch (e) {
      for (const a of asks) a.reject(e);
    }
  }

  /** A fence for the writes of one partition under one epoch. */
  fenceFor(topic: string, partition: number, epoch: number): WriteFence {
    return this.fence.fenceFor({ topic, partition }, epoch);
  }

  async list(topics?: string[]): Promise<LeaseRow[]> {
    const rows: {
      topic: string;
      partition: number;
      owner: string | null;
      epoch: string;
      renewed_at: Date | null;
      rejected_writes: string;
    }[] = await this.db.query(
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

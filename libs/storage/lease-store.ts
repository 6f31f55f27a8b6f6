import type { DataSource, EntityManager } from 'typeorm';

/** A write of a partition refused because another owner holds the partition under a newer epoch. */
export class StaleEpochError extends Error {
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly epoch: number,
    readonly current: number | undefined,
  ) {
    super(`partition ${topic}#${partition} is held under epoch ${current ?? 'none'}; a write under epoch ${epoch} was rejected`);
    this.name = 'StaleEpochError';
  }
}

/** Runs the writes of one partition (offsets, parked retries, dead letters) in one transaction, fenced or not. */
export interface WriteFence {
  /** 0 when nothing is fenced (LOCAL_STICKY_PULL). */
  readonly epoch: number;
  /** `manager` is the fenced transaction; undefined when unfenced (each store then uses its own connection). */
  run<T>(work: (manager: EntityManager | undefined) => Promise<T>): Promise<T>;
}

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
  /**
   * `waitLimitMs` bounds every wait of a lease transaction: for a row lock, inside an open transaction, and per
   * statement. A process stopped in the middle of a fenced write (SIGSTOP, a long pause) holds the lease row;
   * Postgres ends its session after this long, so a new owner's claim is never blocked for longer. Half the
   * lease TTL.
   */
  constructor(
    private readonly db: DataSource,
    private readonly waitLimitMs = 5000,
  ) {}

  /** Bounds the waits of the transaction `manager` runs (see the constructor). */
  private async bound(manager: EntityManager): Promise<void> {
    const limit = `${this.waitLimitMs}ms`;
    await manager.query(
      `SELECT set_config('lock_timeout', $1, true), set_config('idle_in_transaction_session_timeout', $1, true),
              set_config('statement_timeout', $2, true)`,
      [limit, `${2 * this.waitLimitMs}ms`],
    );
  }

  async claim(topic: string, partition: number, owner: string, epoch: number): Promise<ClaimResult> {
    const rows: { epoch: string; owner: string | null; claimed: boolean }[] = await this.db.transaction(async (manager) => {
      await this.bound(manager);
      return manager.query(
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
      );
    });
    const row = rows[0];
    if (row?.claimed) return { claimed: true };
    return { claimed: false, current: Number(row?.epoch ?? 0), owner: row?.owner ?? null };
  }

  /** Records that the owner under `epoch` is alive; false (and counted) when a newer owner holds the partition. */
  async renew(topic: string, partition: number, epoch: number): Promise<boolean> {
    const result: unknown[] = await this.db.transaction(async (manager) => {
      await this.bound(manager);
      return manager.query(
        `UPDATE partition_leases SET renewed_at = now() WHERE topic = $1 AND partition = $2 AND epoch = $3 RETURNING 1`,
        [topic, partition, epoch],
      );
    });
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    if (Number(result[1] ?? 0) > 0) return true;
    await this.countRejected(topic, partition);
    return false;
  }

  /** A fence for the writes of one partition under one epoch. */
  fenceFor(topic: string, partition: number, epoch: number): WriteFence {
    return {
      epoch,
      run: async <T>(work: (manager: EntityManager) => Promise<T>): Promise<T> => {
        try {
          return await this.db.transaction(async (manager) => {
            await this.bound(manager);
            const rows: { epoch: string }[] = await manager.query(
              `SELECT epoch FROM partition_leases WHERE topic = $1 AND partition = $2 FOR SHARE`,
              [topic, partition],
            );
            const current = rows[0] ? Number(rows[0].epoch) : undefined;
            if (current !== epoch) throw new StaleEpochError(topic, partition, epoch, current);
            return work(manager);
          });
        } catch (e) {
          if (e instanceof StaleEpochError) await this.countRejected(topic, partition);
          throw e;
        }
      },
    };
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

  private async countRejected(topic: string, partition: number): Promise<void> {
    await this.db.query(`UPDATE partition_leases SET rejected_writes = rejected_writes + 1 WHERE topic = $1 AND partition = $2`, [topic, partition]);
  }
}

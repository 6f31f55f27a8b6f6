import type { DataSource } from 'typeorm';
import { EpochFence, WriteFence } from '@libs/fence';

/** A dead letter a round writes with its position. */
export interface NewDeadLetter {
  reason: string;
  record: unknown;
  /** What the letter is of (a sink: the event's source and id): one letter per key waits at a time. */
  key?: string;
}

/**
 * `connectors.job_runs`: the epochs of a job's runs, and every write a run makes (its position, its counts, its
 * dead letters), fenced with the same helper as the runtime's dispatch loops (libs/fence). Every start of a job's
 * run activity claims the next epoch; every write of the run is a transaction that first checks the epoch FOR
 * SHARE, so a run that lost the job (its replica stopped, its heartbeat timed out, another replica took over)
 * cannot write a position any more: the write is refused with `StaleEpochError` and the run stops.
 */
export class JobRunStore {
  private readonly fence: EpochFence<string>;

  constructor(
    private readonly db: DataSource,
    waitLimitMs = 5000,
  ) {
    this.fence = new EpochFence(
      db,
      {
        table: 'connectors.job_runs',
        keyColumns: ['job_id'],
        keyValues: (jobId) => [jobId],
        scopeOf: (jobId) => ({ kind: 'connector-job', jobId }),
        rowsCarryEpoch: true,
      },
      waitLimitMs,
    );
  }

  /** Takes the job's next epoch for `owner`: every write under an older epoch is refused from now on. */
  claim(jobId: string, owner: string): Promise<number> {
    return this.fence.claim(jobId, owner);
  }

  renew(jobId: string, epoch: number): Promise<boolean> {
    return this.fence.renew(jobId, epoch);
  }

  fenceFor(jobId: string, epoch: number): WriteFence {
    return this.fence.fenceFor(jobId, epoch);
  }

  async position(jobId: string): Promise<string | undefined> {
    const rows: { position: string | null }[] = await this.db.query(
      `SELECT position FROM connectors.job_positions WHERE job_id = $1`,
      [jobId],
    );
    return rows[0]?.position ?? undefined;
  }

  /**
   * Commits one round under `fence`: the position after it (undefined: unchanged), its counts (also per second,
   * for the throughput), its dead letters, in one transaction behind the epoch check. Throws `StaleEpochError` when the run lost the job.
   */
  async commit(
    fence: WriteFence,
    jobId: string,
    round: { position?: string; moved: number; deadLetters: NewDeadLetter[] },
  ): Promise<{ deadLettered: number }> {
    return fence.run(async (manager) => {
      const q = manager ?? this.db;
      // A letter whose key has one waiting already is not recorded again (migration 003), nor counted.
      let deadLettered = 0;
      for (const d of round.deadLetters) {
        const inserted = (await q.query(
          `INSERT INTO connectors.dead_letters (job_id, reason, record, key) VALUES ($1, $2, $3, $4)
           ON CONFLICT (job_id, key) WHERE key IS NOT NULL AND replayed_at IS NULL DO NOTHING RETURNING id`,
          [jobId, d.reason, JSON.stringify(d.record), d.key ?? null],
        )) as unknown[];
        deadLettered += inserted.length;
      }
      // The position, the counts, this second's count and the minute's window in one statement.
      await q.query(
        `WITH pos AS (
           INSERT INTO connectors.job_positions AS p (job_id, position, moved, dead_lettered, epoch)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (job_id) DO UPDATE
             SET position = COALESCE(EXCLUDED.position, p.position), moved = p.moved + EXCLUDED.moved,
                 dead_lettered = p.dead_lettered + EXCLUDED.dead_lettered, epoch = EXCLUDED.epoch, updated_at = now()),
         sec AS (
           INSERT INTO connectors.job_moved AS m (job_id, at, moved)
           SELECT $1, date_trunc('second', now()), $3 WHERE $3 > 0
           ON CONFLICT (job_id, at) DO UPDATE SET moved = m.moved + EXCLUDED.moved)
         DELETE FROM connectors.job_moved WHERE $3 > 0 AND job_id = $1 AND at < now() - interval '1 minute'`,
        [jobId, round.position ?? null, round.moved, deadLettered, fence.rowEpoch],
      );
      return { deadLettered };
    });
  }

  /**
   * An operator's reset of a source's position: takes the next epoch (fencing the run in flight, which stops at
   * its next write) and writes the position in the same transaction. The next run starts from it.
   */
  async resetPosition(jobId: string, position: string | null): Promise<void> {
    await this.fence.transaction(async (manager) => {
      await this.fence.claim(jobId, 'reset', manager);
      await manager.query(
        `INSERT INTO connectors.job_positions AS p (job_id, position, epoch) VALUES ($1, $2, 0)
         ON CONFLICT (job_id) DO UPDATE SET position = EXCLUDED.position, updated_at = now()`,
        [jobId, position],
      );
    });
  }
}

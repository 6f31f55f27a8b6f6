import { createLogger } from '@libs/logging';
import { DEAD_LETTER_PURGE_BATCH } from './dead-letter-store';

const DAY_MS = 24 * 60 * 60 * 1000;

export interface RetentionPurgeOptions {
  /**
   * Rows older than this many days are deleted; 0 keeps them (EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS for the
   * dead letters, EVENTMESH_AGENTS_TASK_RETENTION_DAYS for the A2A tasks).
   */
  retentionDays: number;
  /** Rows one delete statement removes at most. */
  batchSize?: number;
  /** Most batches one purge runs; what is left waits for the next purge. */
  maxBatches?: number;
  /** What the store keeps, for the log (`dead letters`, `A2A push dead letters`, `A2A tasks`). */
  what?: string;
}

/** A store that deletes at most `limit` of its rows older than the cutoff, oldest first, and answers how many. */
export interface PurgeableRows {
  purgeOlderThan(cutoff: Date, limit?: number): Promise<number>;
}

/**
 * A retention: one purge deletes the rows older than the retention period (the dead letters of the delivery and of
 * the A2A pushes, the A2A tasks that ended), in small batches, at most `maxBatches` of them, so the delete never
 * holds many rows or runs long. Temporal schedules run a purge every ten minutes (`dlq-retention`,
 * workflows/dlq-retention.workflow.ts; `a2a-task-retention`, workflows/a2a-task-retention.workflow.ts); several
 * purges at once skip each other's locked rows. A failed purge throws (its activity is retried); what its earlier
 * batches deleted stays deleted.
 */
export class RetentionPurge {
  private readonly log = createLogger('RetentionPurge');

  constructor(
    private readonly store: PurgeableRows,
    private readonly options: RetentionPurgeOptions,
  ) {}

  /** One purge: the number of dead letters deleted (none when retention is off, 0 days). */
  async purge(now = Date.now()): Promise<number> {
    if (this.options.retentionDays === 0) return 0;
    const cutoff = new Date(now - this.options.retentionDays * DAY_MS);
    const size = this.options.batchSize ?? DEAD_LETTER_PURGE_BATCH;
    let deleted = 0;
    for (let batch = 0; batch < (this.options.maxBatches ?? 10); batch++) {
      const n = await this.store.purgeOlderThan(cutoff, size);
      deleted += n;
      if (n < size) break;
    }
    if (deleted > 0)
      this.log.info(
        { deleted, before: cutoff.toISOString() },
        `deleted ${this.options.what ?? 'dead letters'} past their retention`,
      );
    return deleted;
  }
}

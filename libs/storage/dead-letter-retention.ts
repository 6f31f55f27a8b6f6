import { createLogger } from '../logging';
import { DEAD_LETTER_PURGE_BATCH } from './dead-letter-store';

const DAY_MS = 24 * 60 * 60 * 1000;

export interface DeadLetterRetentionOptions {
  /** Dead letters older than this many days are deleted; 0 keeps them (EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS). */
  retentionDays: number;
  /** Rows one delete statement removes at most. */
  batchSize?: number;
  /** Most batches one purge runs; what is left waits for the next purge. */
  maxBatches?: number;
  /** What the store keeps, for the log (`dead letters`, `A2A push dead letters`). */
  what?: string;
}

/** A store of letters that deletes at most `limit` of those older than the cutoff, oldest first, and answers how many. */
export interface PurgeableLetters {
  purgeOlderThan(cutoff: Date, limit?: number): Promise<number>;
}

/**
 * Retention of the dead-letter queue: one purge deletes the dead letters older than the retention period, in
 * small batches, at most `maxBatches` of them, so the delete never holds many rows or runs long. The Temporal
 * schedule `dlq-retention` runs a purge every ten minutes (workflows/dlq-retention.workflow.ts); several purges at
 * once skip each other's locked rows. A failed purge throws (its activity is retried); what its earlier batches
 * deleted stays deleted.
 */
export class DeadLetterRetention {
  private readonly log = createLogger('DeadLetterRetention');

  constructor(
    private readonly store: PurgeableLetters,
    private readonly options: DeadLetterRetentionOptions,
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
    if (deleted > 0) this.log.info({ deleted, before: cutoff.toISOString() }, `deleted ${this.options.what ?? 'dead letters'} past their retention`);
    return deleted;
  }
}

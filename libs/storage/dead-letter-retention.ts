import { createLogger } from '../logging';
import { DEAD_LETTER_PURGE_BATCH, DeadLetterStore } from './dead-letter-store';

const DAY_MS = 24 * 60 * 60 * 1000;

export interface DeadLetterRetentionOptions {
  /** Dead letters older than this many days are deleted; 0 keeps them (EVENTMESH_DELIVERY_DEAD_LETTER_RETENTION_DAYS). */
  retentionDays: number;
  /** Time between two purges. */
  intervalMs?: number;
  /** Rows one delete statement removes at most. */
  batchSize?: number;
  /** Most batches one purge runs; what is left waits for the next purge. */
  maxBatches?: number;
}

/**
 * Retention of the dead-letter queue: every `intervalMs` the worker deletes dead letters older than the retention
 * period, in small batches, at most `maxBatches` per purge, so the delete never holds many rows or runs long.
 * Several instances may purge at once; their batches skip each other's locked rows. A failed purge is logged and
 * tried again at the next interval.
 */
export class DeadLetterRetention {
  private readonly log = createLogger('DeadLetterRetention');
  private timer?: NodeJS.Timeout;
  private purging?: Promise<number>;

  constructor(
    private readonly store: Pick<DeadLetterStore, 'purgeOlderThan'>,
    private readonly options: DeadLetterRetentionOptions,
  ) {}

  /** Schedules the purges; false when retention is off (0 days). */
  start(): boolean {
    if (this.options.retentionDays === 0) return false;
    this.timer ??= setInterval(() => void this.purge(), this.options.intervalMs ?? 10 * 60 * 1000);
    this.timer.unref();
    return true;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.purging;
  }

  /** One purge: the number of dead letters deleted. Never throws; one at a time. */
  purge(now = Date.now()): Promise<number> {
    this.purging ??= this.run(new Date(now - this.options.retentionDays * DAY_MS)).finally(() => (this.purging = undefined));
    return this.purging;
  }

  private async run(cutoff: Date): Promise<number> {
    let deleted = 0;
    try {
      const size = this.options.batchSize ?? DEAD_LETTER_PURGE_BATCH;
      for (let batch = 0; batch < (this.options.maxBatches ?? 10); batch++) {
        const n = await this.store.purgeOlderThan(cutoff, size);
        deleted += n;
        if (n < size) break;
      }
    } catch (e) {
      this.log.warn({ error: (e as Error).message, deleted }, 'dead-letter retention purge failed; the next one tries again');
      return deleted;
    }
    if (deleted > 0) this.log.info({ deleted, before: cutoff.toISOString() }, 'deleted dead letters past their retention');
    return deleted;
  }
}

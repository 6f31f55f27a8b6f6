import type { DataSource } from 'typeorm';

/** What `/metrics` reads from Postgres (runtime-wide, not per instance): table sizes and the fences' state. */
export interface StoredCounts {
  /** Deliveries parked in the retry table (`delivery_retries`). */
  parked: number;
  /** Dead letters kept (`dead_letters`). */
  deadLetters: number;
  /** A2A pushes given up and not resolved since (`a2a_push_dead_letters`, resolution null). */
  pushDeadLetters: number;
  /** Writes refused for a stale epoch, summed over each epoch table (`rejected_writes`). */
  rejectedWrites: { partitionLeases: number; dispatchRuns: number };
  /** PARTITION_OWNED_PULL: each partition's epoch (its ownership changes) and owner; empty in LOCAL_STICKY_PULL. */
  partitions: { topic: string; partition: number; epoch: number; owned: boolean }[];
}

/**
 * Reads {@link StoredCounts} in one round trip. Both counts scan their table, so callers read it rarely and
 * share the answer (libs/metrics caches it).
 */
export class StoredCountsReader {
  constructor(private readonly db: DataSource) {}

  async read(): Promise<StoredCounts> {
    const [totals]: {
      parked: string;
      dead_letters: string;
      push_dead_letters: string;
      lease_rejected: string;
      run_rejected: string;
    }[] = await this.db.query(
      `SELECT (SELECT count(*) FROM delivery_retries) AS parked,
              (SELECT count(*) FROM dead_letters) AS dead_letters,
              (SELECT count(*) FROM a2a_push_dead_letters WHERE resolution IS NULL) AS push_dead_letters,
              (SELECT coalesce(sum(rejected_writes), 0) FROM partition_leases) AS lease_rejected,
              (SELECT coalesce(sum(rejected_writes), 0) FROM dispatch_runs) AS run_rejected`,
    );
    const partitions: { topic: string; partition: number; epoch: string; owner: string | null }[] = await this.db.query(
      'SELECT topic, partition, epoch, owner FROM partition_leases ORDER BY topic, partition',
    );
    return {
      parked: Number(totals.parked),
      deadLetters: Number(totals.dead_letters),
      pushDeadLetters: Number(totals.push_dead_letters),
      rejectedWrites: { partitionLeases: Number(totals.lease_rejected), dispatchRuns: Number(totals.run_rejected) },
      partitions: partitions.map((p) => ({
        topic: p.topic,
        partition: Number(p.partition),
        epoch: Number(p.epoch),
        owned: p.owner !== null,
      })),
    };
  }
}

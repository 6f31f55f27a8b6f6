import type { DataSource, EntityManager } from 'typeorm';

/**
 * What an epoch fences: one partition (PARTITION_OWNED_PULL, `partition_leases`), the dispatch run of one
 * instance (LOCAL_STICKY_PULL, `dispatch_runs`), or the run of one connector job (`connectors.job_runs`). Named in every refusal, so a log line says which it was.
 */
export type FencedScope =
  | { kind: 'partition'; topic: string; partition: number }
  | { kind: 'dispatch-run'; instanceId: string }
  | { kind: 'connector-job'; jobId: string };

export function describeScope(scope: FencedScope): string {
  switch (scope.kind) {
    case 'partition':
      return `partition ${scope.topic}#${scope.partition}`;
    case 'dispatch-run':
      return `the dispatch run of instance ${scope.instanceId}`;
    case 'connector-job':
      return `the run of connector job ${scope.jobId}`;
  }
}

/** A write refused because the fenced row holds a newer epoch than the writer's: the writer is stale and must stop. */
export class StaleEpochError extends Error {
  constructor(
    readonly fenced: FencedScope,
    readonly epoch: number,
    readonly current: number | undefined,
  ) {
    super(
      `${describeScope(fenced)} is held under epoch ${current ?? 'none'}; a write under epoch ${epoch} was refused`,
    );
    this.name = 'StaleEpochError';
  }
}

/** Runs the writes of one fenced scope (offsets, parked retries, dead letters, a disable) in one transaction, fenced or not. */
export interface WriteFence {
  /** The fencing token the transaction checks; 0 when nothing is fenced. */
  readonly epoch: number;
  /**
   * The epoch the rows written under this fence carry (`subscription_offsets.epoch`, `delivery_retries.epoch`):
   * a partition lease's epoch, which orders the owners of that very partition; 0 under a dispatch run, whose
   * epoch counts the runs of one instance and orders nothing between instances a subscription may move across.
   * A row written with 0 keeps its stored epoch (offset-store.ts).
   */
  readonly rowEpoch: number;
  /** `manager` is the fenced transaction; undefined when unfenced (each store then uses its own connection). */
  run<T>(work: (manager: EntityManager | undefined) => Promise<T>): Promise<T>;
}

/** No fence: each store uses its own connection. Only for tests and tools; every dispatch loop runs fenced. */
export const UNFENCED: WriteFence = { epoch: 0, rowEpoch: 0, run: (work) => work(undefined) };

/** A table of epoch rows: its name, the columns of its key, and what a key fences. */
export interface EpochTable<K> {
  /** `partition_leases`, `dispatch_runs` (the runtime's), `connectors.job_runs` (apps/connectors). */
  table: string;
  keyColumns: readonly string[];
  keyValues(key: K): unknown[];
  scopeOf(key: K): FencedScope;
  /** Whether the rows written under a fence carry its epoch ({@link WriteFence.rowEpoch}). */
  rowsCarryEpoch: boolean;
}

/**
 * The one fence mechanism of both epoch tables. A fenced write is a transaction that first locks the epoch row
 * FOR SHARE and compares its epoch with the writer's, then runs the work in that same transaction: a claim (or a
 * takeover's `UPDATE ... SET epoch = epoch + 1`) needs the row exclusively, so it waits for a fenced write in
 * flight, and every fenced write after it sees the new epoch and is refused. A refusal is counted on the row
 * (`rejected_writes`).
 *
 * `waitLimitMs` bounds every wait of these transactions: for a row lock, idle inside an open transaction, and
 * (twice it) per statement. A process stopped in the middle of a fenced write (SIGSTOP, a long pause) holds the
 * row; Postgres ends its session after this long, so a claim is never blocked for longer.
 */
export class EpochFence<K> {
  private readonly where: string;

  constructor(
    private readonly db: DataSource,
    private readonly rows: EpochTable<K>,
    readonly waitLimitMs = 5000,
  ) {
    this.where = rows.keyColumns.map((c, i) => `${c} = $${i + 1}`).join(' AND ');
  }

  /** A transaction whose waits are bounded (see the class). */
  transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(async (manager) => {
      await manager.query(`SELECT ${this.boundsFrom(1)}`, this.boundValues());
      return work(manager);
    });
  }

  /** The select list that bounds the transaction's waits, its two values from parameter `$first`. */
  private boundsFrom(first: number): string {
    const [limit, statement] = [`$${first}`, `$${first + 1}`];
    return `set_config('lock_timeout', ${limit}, true), set_config('idle_in_transaction_session_timeout', ${limit}, true),
            set_config('statement_timeout', ${statement}, true)`;
  }

  private boundValues(): string[] {
    return [`${this.waitLimitMs}ms`, `${2 * this.waitLimitMs}ms`];
  }

  /**
   * Takes `key`'s next epoch (1 for the first) for `owner` and returns it, in `manager`'s transaction or one of its
   * own. Needs the row exclusively, so it waits for a fenced write in flight; every write under an older epoch is
   * refused after it. The table has `epoch`, `owner`, `claimed_at` and `renewed_at` beside its key columns.
   */
  async claim(key: K, owner: string, manager?: EntityManager): Promise<number> {
    const keys = this.rows.keyColumns;
    const values = this.rows.keyValues(key);
    const claimIn = (m: EntityManager): Promise<{ epoch: string }[]> =>
      m.query(
        `INSERT INTO ${this.rows.table} AS r (${keys.join(', ')}, epoch, owner, claimed_at, renewed_at)
         VALUES (${keys.map((_, i) => `$${i + 1}`).join(', ')}, 1, $${keys.length + 1}, now(), now())
         ON CONFLICT (${keys.join(', ')}) DO UPDATE
           SET epoch = r.epoch + 1, owner = EXCLUDED.owner, claimed_at = now(), renewed_at = now()
         RETURNING r.epoch`,
        [...values, owner],
      );
    const rows = manager ? await claimIn(manager) : await this.transaction(claimIn);
    return Number(rows[0].epoch);
  }

  /** A fence for the writes made under `epoch` of `key`'s row. */
  fenceFor(key: K, epoch: number): WriteFence {
    const keyValues = this.rows.keyValues(key);
    return {
      epoch,
      rowEpoch: this.rows.rowsCarryEpoch ? epoch : 0,
      run: async <T>(work: (manager: EntityManager) => Promise<T>): Promise<T> => {
        try {
          return await this.db.transaction(async (manager) => {
            // The bounds and the epoch check in one statement, the bounds first by the statement's shape, not by
            // an order of evaluation within a select list: a materialized CTE is its own plan node, and the epoch
            // subquery is evaluated when the row that CTE makes is projected. So the row's share lock is waited
            // for under the bounds, as in `transaction`.
            const found: { epoch: string | null }[] = await manager.query(
              `WITH bounds AS MATERIALIZED (SELECT ${this.boundsFrom(keyValues.length + 1)})
               SELECT (SELECT epoch FROM ${this.rows.table} WHERE ${this.where} FOR SHARE) AS epoch FROM bounds`,
              [...keyValues, ...this.boundValues()],
            );
            const current = found[0]?.epoch != null ? Number(found[0].epoch) : undefined;
            if (current !== epoch) throw new StaleEpochError(this.rows.scopeOf(key), epoch, current);
            return work(manager);
          });
        } catch (e) {
          if (e instanceof StaleEpochError) await this.countRejected(key);
          throw e;
        }
      },
    };
  }

  /** Records that the writer under `epoch` is alive (`renewed_at`); false, and counted, when the row moved on. */
  async renew(key: K, epoch: number): Promise<boolean> {
    const n = this.rows.keyColumns.length;
    const result: unknown[] = await this.transaction((manager) =>
      manager.query(
        `UPDATE ${this.rows.table} SET renewed_at = now() WHERE ${this.where} AND epoch = $${n + 1} RETURNING 1`,
        [...this.rows.keyValues(key), epoch],
      ),
    );
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    if (Number(result[1] ?? 0) > 0) return true;
    await this.countRejected(key);
    return false;
  }

  private async countRejected(key: K): Promise<void> {
    await this.db.query(
      `UPDATE ${this.rows.table} SET rejected_writes = rejected_writes + 1 WHERE ${this.where}`,
      this.rows.keyValues(key),
    );
  }
}

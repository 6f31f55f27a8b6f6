import type { DataSource, EntityManager } from 'typeorm';

/**
 * An ACTIVE subscription whose instance has shown no sign of life for longer than the grace: neither its dispatch
 * run (`dispatch_runs.renewed_at`) nor the subscription itself (created, moved or replaced: `updated_at`) is more
 * recent than that. Nobody delivers it until it moves.
 */
export interface OrphanRow {
  subscriptionId: string;
  topic: string;
  protocol: string;
  /** The instance it is pinned to, which no longer runs. */
  instanceId: string;
  /** When that instance's dispatch run last renewed itself; null when it never ran (or only a move fenced it). */
  lastRenewedAt: Date | null;
  /** When it became an orphan: its last sign of life plus the grace. */
  orphanedSince: Date;
}

/** A subscription moved from one instance to another, and the epoch the move fenced the old one's dispatch run with. */
export interface PlacementMove {
  subscriptionId: string;
  from: string;
  to: string;
  /** The epoch `from`'s dispatch run holds after the move; every write under an older one is refused. */
  fencedEpoch: number;
}

export type MoveRefusal = 'SUBSCRIPTION_GONE' | 'MOVED_CONCURRENTLY' | 'TARGET_NOT_LIVE';

export type MoveResult =
  | { moved: true; move: PlacementMove }
  /** Nothing changed: `current` is where the subscription is (absent when it does not exist). */
  | { moved: false; rejected: MoveRefusal; current?: string };

/** What one takeover round did for one instance's orphans. */
export interface TakeoverResult {
  moves: PlacementMove[];
  /** Instances whose orphans were left this round because their dispatch run row was held (a mover, a fenced write). */
  skippedInstances: string[];
}

const GRACE = `($1::bigint * interval '1 millisecond')`;

/**
 * Where each subscription is dispatched in LOCAL_STICKY_PULL (`subscriptions.instance_id`), the orphans (see
 * {@link OrphanRow}), and the one write that moves a subscription to another instance. A move is one transaction
 * that takes the next epoch of the old instance's dispatch run (`dispatch_runs`, locked first, as a fenced write
 * locks it) and then changes `instance_id` only if it still names the old instance, so of two movers one wins
 * and the other changes nothing; and a run of the old instance that still works (a process thought dead) has
 * every later write refused, so it can never write the moved subscription's offsets, retries or dead letters.
 * Liveness is read from `dispatch_runs.renewed_at`, which a live run renews at least every fifth of a lease TTL.
 */
export class PlacementStore {
  /** `waitLimitMs` bounds every wait of a move for a lock (and, twice it, each statement). */
  constructor(
    private readonly db: DataSource,
    private readonly waitLimitMs = 5000,
  ) {}

  private transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(async (manager) => {
      await manager.query(
        `SELECT set_config('lock_timeout', $1, true), set_config('idle_in_transaction_session_timeout', $1, true),
                set_config('statement_timeout', $2, true)`,
        [`${this.waitLimitMs}ms`, `${2 * this.waitLimitMs}ms`],
      );
      return work(manager);
    });
  }

  /** Every orphan, longest orphaned first. */
  async orphans(graceMs: number): Promise<OrphanRow[]> {
    const rows: {
      id: string;
      topic: string;
      protocol: string;
      instance_id: string;
      renewed_at: Date | null;
      orphaned_since: Date;
    }[] = await this.db.query(
      `SELECT s.id, s.topic, s.protocol, s.instance_id, r.renewed_at,
                GREATEST(r.renewed_at, s.updated_at) + ${GRACE} AS orphaned_since
           FROM subscriptions s LEFT JOIN dispatch_runs r ON r.instance_id = s.instance_id
          WHERE s.status = 'ACTIVE' AND GREATEST(r.renewed_at, s.updated_at) < now() - ${GRACE}
          ORDER BY orphaned_since, s.id`,
      [graceMs],
    );
    return rows.map((r) => ({
      subscriptionId: r.id,
      topic: r.topic,
      protocol: r.protocol,
      instanceId: r.instance_id,
      lastRenewedAt: r.renewed_at,
      orphanedSince: r.orphaned_since,
    }));
  }

  /** The instances whose dispatch run renewed itself within the grace. */
  async liveInstances(graceMs: number, manager: EntityManager = this.db.manager): Promise<string[]> {
    const rows: { instance_id: string }[] = await manager.query(
      `SELECT instance_id FROM dispatch_runs WHERE renewed_at >= now() - ${GRACE} ORDER BY instance_id`,
      [graceMs],
    );
    return rows.map((r) => r.instance_id);
  }

  /** The instance the subscription is on; undefined when it does not exist. */
  async instanceOf(subscriptionId: string, manager: EntityManager = this.db.manager): Promise<string | undefined> {
    const found: { instance_id: string }[] = await manager.query(
      `SELECT instance_id FROM subscriptions WHERE id = $1`,
      [subscriptionId],
    );
    return found[0]?.instance_id;
  }

  /**
   * Moves a subscription from `from` to `to` (an operator's move). Refused, changing nothing, when the
   * subscription is gone, no longer on `from` (another move won), or, unless `force`, when `to` has no live
   * dispatch run (nobody would deliver it).
   */
  async move(
    subscriptionId: string,
    from: string,
    to: string,
    options: { graceMs: number; force: boolean },
  ): Promise<MoveResult> {
    return this.transaction(async (manager): Promise<MoveResult> => {
      if (!options.force && !(await this.isLive(manager, to, options.graceMs))) {
        return { moved: false, rejected: 'TARGET_NOT_LIVE', current: from };
      }
      const fencedEpoch = await this.fence(manager, from);
      const moved: unknown[] = await manager.query(
        `UPDATE subscriptions SET instance_id = $3, updated_at = now() WHERE id = $1 AND instance_id = $2 RETURNING 1`,
        [subscriptionId, from, to],
      );
      if (Number(moved[1] ?? 0) === 0) {
        const current = await this.instanceOf(subscriptionId, manager);
        // The fence taken above is rolled back with the transaction.
        throw new MoveRefused(
          current !== undefined
            ? { moved: false, rejected: 'MOVED_CONCURRENTLY', current }
            : { moved: false, rejected: 'SUBSCRIPTION_GONE' },
        );
      }
      return { moved: true, move: { subscriptionId, from, to, fencedEpoch } };
    }).catch((e: unknown): MoveResult => {
      if (e instanceof MoveRefused) return e.result;
      throw e;
    });
  }

  /**
   * One takeover round of instance `to`: takes up to `max` orphans of other instances on `topics` (those `to`
   * serves; it could not dispatch the others), each instance's in one move (see the class). The old instance's dispatch run row is locked first, FOR UPDATE SKIP LOCKED: while
   * another mover (or a fenced write of a run that is not dead after all) holds it, its orphans are left for a
   * later round instead of waited for. Orphan-ness is checked again under that lock, so a run that renewed itself
   * in the meantime keeps its subscriptions; subscription rows someone else holds (a replace in flight) are
   * skipped too (FOR NO KEY UPDATE, the lock the move's UPDATE takes anyway).
   */
  async takeOrphans(to: string, topics: string[], graceMs: number, max: number): Promise<TakeoverResult> {
    const result: TakeoverResult = { moves: [], skippedInstances: [] };
    const candidates: { instance_id: string }[] = await this.db.query(
      `SELECT s.instance_id FROM subscriptions s LEFT JOIN dispatch_runs r ON r.instance_id = s.instance_id
        WHERE s.status = 'ACTIVE' AND s.instance_id <> $2 AND s.topic = ANY($3::text[])
          AND GREATEST(r.renewed_at, s.updated_at) < now() - ${GRACE}
        GROUP BY s.instance_id ORDER BY min(GREATEST(r.renewed_at, s.updated_at)), s.instance_id`,
      [graceMs, to, topics],
    );
    for (const { instance_id: from } of candidates) {
      const room = max - result.moves.length;
      if (room <= 0) break;
      const taken = await this.transaction(async (manager) => {
        // A row to lock (and to fence) even for an instance that never ran.
        await manager.query(
          `INSERT INTO dispatch_runs (instance_id) VALUES ($1) ON CONFLICT (instance_id) DO NOTHING`,
          [from],
        );
        const run: { renewed_at: Date | null }[] = await manager.query(
          `SELECT renewed_at FROM dispatch_runs WHERE instance_id = $1 FOR UPDATE SKIP LOCKED`,
          [from],
        );
        if (run.length === 0) return undefined;
        const ids: { id: string }[] = await manager.query(
          `SELECT s.id FROM subscriptions s
            WHERE s.instance_id = $2 AND s.status = 'ACTIVE' AND s.topic = ANY($5::text[])
              AND GREATEST($3::timestamptz, s.updated_at) < now() - ${GRACE}
            ORDER BY s.updated_at, s.id LIMIT $4 FOR NO KEY UPDATE SKIP LOCKED`,
          [graceMs, from, run[0].renewed_at, room, topics],
        );
        if (ids.length === 0) return [];
        const fencedEpoch = await this.fence(manager, from);
        const moved: [{ id: string }[], number] = await manager.query(
          `UPDATE subscriptions SET instance_id = $3, updated_at = now() WHERE id = ANY($1::uuid[]) AND instance_id = $2 RETURNING id`,
          [ids.map((r) => r.id), from, to],
        );
        // In the order they were chosen (the longest orphaned first): RETURNING follows no order.
        const movedIds = new Set(moved[0].map((r) => r.id));
        return ids
          .filter((r) => movedIds.has(r.id))
          .map((r): PlacementMove => ({ subscriptionId: r.id, from, to, fencedEpoch }));
      });
      if (taken === undefined) result.skippedInstances.push(from);
      else result.moves.push(...taken);
    }
    return result;
  }

  /** Takes the next epoch of `instanceId`'s dispatch run (creating its row if it never ran), fencing that run. */
  private async fence(manager: EntityManager, instanceId: string): Promise<number> {
    const rows: { epoch: string }[] = await manager.query(
      `INSERT INTO dispatch_runs AS r (instance_id, epoch) VALUES ($1, 1)
       ON CONFLICT (instance_id) DO UPDATE SET epoch = r.epoch + 1
       RETURNING r.epoch`,
      [instanceId],
    );
    return Number(rows[0].epoch);
  }

  private async isLive(manager: EntityManager, instanceId: string, graceMs: number): Promise<boolean> {
    const rows: unknown[] = await manager.query(
      `SELECT 1 FROM dispatch_runs WHERE instance_id = $2 AND renewed_at >= now() - ${GRACE}`,
      [graceMs, instanceId],
    );
    return rows.length > 0;
  }
}

/** Unwinds a move's transaction with what to answer. */
class MoveRefused extends Error {
  constructor(readonly result: MoveResult) {
    super(`move refused: ${(result as { rejected?: string }).rejected}`);
  }
}

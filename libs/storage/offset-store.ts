import type { DataSource, EntityManager } from 'typeorm';

/** One subscription's position in one partition: the next offset it has not settled yet. */
export interface OffsetPosition {
  subscriptionId: string;
  topic: string;
  partition: number;
  nextOffset: number;
  epoch: number;
}

export type OffsetRejection = 'STALE_EPOCH' | 'BACKWARDS' | 'SUBSCRIPTION_GONE';

export interface OffsetCommitResult {
  position: OffsetPosition;
  applied: boolean;
  /** Why a write changed nothing; absent when applied. */
  rejected?: OffsetRejection;
  /** What the row held before this write (absent when there was no row). */
  current?: { nextOffset: number; epoch: number };
}

const key = (p: { subscriptionId: string; topic: string; partition: number }) =>
  `${p.subscriptionId}\u0000${p.topic}\u0000${p.partition}`;

/**
 * Subscription offsets in Postgres. Every write is monotonic: it applies only if it moves the offset forward (or
 * keeps it) under the same or a newer epoch. The row's epoch is a partition lease's (PARTITION_OWNED_PULL).
 * LOCAL_STICKY_PULL writes epoch 0: its fence is the dispatch run's row, locked and checked in the same
 * transaction (dispatch-run-store.ts), and an instance's run epochs order nothing between the instances a
 * subscription may move across; a write with epoch 0 keeps the stored epoch and is refused only for going
 * backwards. A write that would move an offset backwards or carries an older epoch changes nothing and comes back
 * rejected, with the reason and the row it lost to. `STALE_EPOCH` means a newer owner holds the partition.
 * `BACKWARDS` means only that the row is already further on (docs/delivery.md says what the loop makes of it). A
 * batch of positions is one statement, so a dispatch loop commits a whole fetch at once.
 */
export class OffsetStore {
  constructor(private readonly db: DataSource) {}

  async commit(positions: OffsetPosition[], manager: EntityManager = this.db.manager): Promise<OffsetCommitResult[]> {
    if (positions.length === 0) return [];
    // A statement cannot touch the same row twice; one batch carries one position per subscription partition.
    const keys = new Set(positions.map(key));
    if (keys.size !== positions.length) throw new Error('offset commit batch holds the same subscription partition twice');
    const rows = positions;
    const result: {
      subscription_id: string;
      topic: string;
      partition: number;
      applied: boolean;
      exists: boolean;
      current_offset: string | null;
      current_epoch: string | null;
    }[] = await manager.query(
      `WITH input AS (
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::bigint[], $5::bigint[])
           AS t(subscription_id, topic, partition, next_offset, epoch)
       ), applied AS (
         INSERT INTO subscription_offsets AS o (subscription_id, topic, partition, next_offset, epoch, updated_at)
         SELECT i.subscription_id, i.topic, i.partition, i.next_offset, i.epoch, now()
           FROM input i JOIN subscriptions s ON s.id = i.subscription_id
           -- Holds the subscription row until commit, so a concurrent delete cannot break the foreign key.
           FOR KEY SHARE OF s
         ON CONFLICT (subscription_id, topic, partition) DO UPDATE
           SET next_offset = EXCLUDED.next_offset, epoch = GREATEST(o.epoch, EXCLUDED.epoch), updated_at = now()
           WHERE o.next_offset <= EXCLUDED.next_offset AND (EXCLUDED.epoch = 0 OR o.epoch <= EXCLUDED.epoch)
         RETURNING o.subscription_id, o.topic, o.partition
       )
       SELECT i.subscription_id, i.topic, i.partition,
              (a.subscription_id IS NOT NULL) AS applied,
              EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = i.subscription_id) AS exists,
              cur.next_offset AS current_offset, cur.epoch AS current_epoch
         FROM input i
         LEFT JOIN applied a USING (subscription_id, topic, partition)
         LEFT JOIN subscription_offsets cur USING (subscription_id, topic, partition)`,
      [
        rows.map((r) => r.subscriptionId),
        rows.map((r) => r.topic),
        rows.map((r) => r.partition),
        rows.map((r) => r.nextOffset),
        rows.map((r) => r.epoch),
      ],
    );
    const byKey = new Map(result.map((r) => [key({ subscriptionId: r.subscription_id, topic: r.topic, partition: r.partition }), r]));
    return positions.map((position) => {
      const r = byKey.get(key(position));
      if (!r) throw new Error(`offset commit returned no row for ${key(position)}`);
      const current =
        r.current_offset === null ? undefined : { nextOffset: Number(r.current_offset), epoch: Number(r.current_epoch) };
      if (r.applied) return { position, applied: true, current };
      const rejected: OffsetRejection = !r.exists
        ? 'SUBSCRIPTION_GONE'
        : current && position.epoch > 0 && current.epoch > position.epoch
          ? 'STALE_EPOCH'
          : 'BACKWARDS';
      return { position, applied: false, rejected, current };
    });
  }

  /**
   * The one write that may move an offset backwards: after the Kafka log itself went backwards (a topic deleted
   * and recreated), so the stored offset points past its end. Still refused for an older epoch.
   */
  async rewind(position: OffsetPosition, manager: EntityManager = this.db.manager): Promise<boolean> {
    const result: unknown[] = await manager.query(
      `UPDATE subscription_offsets SET next_offset = $4, epoch = GREATEST(epoch, $5), updated_at = now()
        WHERE subscription_id = $1 AND topic = $2 AND partition = $3 AND ($5 = 0 OR epoch <= $5) RETURNING 1`,
      [position.subscriptionId, position.topic, position.partition, position.nextOffset, position.epoch],
    );
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    return Number(result[1] ?? 0) > 0;
  }

  /** The stored positions of the given subscriptions (all partitions); in the caller's transaction when given one. */
  async positionsOf(subscriptionIds: string[], manager: EntityManager = this.db.manager): Promise<OffsetPosition[]> {
    if (subscriptionIds.length === 0) return [];
    const rows: { subscription_id: string; topic: string; partition: number; next_offset: string; epoch: string }[] =
      await manager.query(
        `SELECT subscription_id, topic, partition, next_offset, epoch FROM subscription_offsets
          WHERE subscription_id = ANY($1::uuid[])`,
        [subscriptionIds],
      );
    return rows.map((r) => ({
      subscriptionId: r.subscription_id,
      topic: r.topic,
      partition: r.partition,
      nextOffset: Number(r.next_offset),
      epoch: Number(r.epoch),
    }));
  }
}

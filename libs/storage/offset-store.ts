import type { DataSource, EntityManager } from 'typeorm';

/** One subscription's position in one partition: the next offset it has not settled yet. */
export interface OffsetPosition {
  subscriptionId: string;
  topic: string;
  partition: number;
  nextOffset: number;
  epoch: number;
  /**
   * The subscription's offsets generation the writer started from (`subscriptions.offsets_generation`; absent: 0).
   * A commit under an older generation than the row's is refused (`SEEKED`): an operator moved the offsets since.
   */
  generation?: number;
}

export type OffsetRejection = 'STALE_EPOCH' | 'SEEKED' | 'BACKWARDS' | 'SUBSCRIPTION_GONE';

export interface OffsetCommitResult {
  position: OffsetPosition;
  applied: boolean;
  /** Why a write changed nothing; absent when applied. */
  rejected?: OffsetRejection;
  /** What the row held before this write (absent when there was no row). */
  current?: { nextOffset: number; epoch: number; generation: number };
}

/** One partition of an operator's seek: where the subscription stood, and where it stands now. */
export interface SeekMove {
  topic: string;
  partition: number;
  /** The stored next offset before the seek; null when the partition had no row. */
  from: number | null;
  to: number;
}

export type SeekResult =
  { applied: true; generation: number; moves: SeekMove[] } | { applied: false; rejected: 'SUBSCRIPTION_GONE' };

const byRow = (a: OffsetPosition, b: OffsetPosition): number =>
  a.subscriptionId < b.subscriptionId
    ? -1
    : a.subscriptionId > b.subscriptionId
      ? 1
      : a.topic < b.topic
        ? -1
        : a.topic > b.topic
          ? 1
          : a.partition - b.partition;

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
 *
 * An operator's seek (`seek`) is the one write that moves a subscription's offsets anywhere: it raises the
 * subscription's offsets generation and writes it on every row it sets. A commit carries the generation its lane
 * started from and is refused (`SEEKED`) by a row of a newer one. The check is in the upsert's own `WHERE`, which
 * Postgres evaluates on the row it locked (the latest version), so a seek and a commit of the same row are
 * serialised by that row lock: whichever comes second, the seek's position stands.
 */
export class OffsetStore {
  constructor(private readonly db: DataSource) {}

  async commit(positions: OffsetPosition[], manager: EntityManager = this.db.manager): Promise<OffsetCommitResult[]> {
    if (positions.length === 0) return [];
    // A statement cannot touch the same row twice; one batch carries one position per subscription partition.
    const keys = new Set(positions.map(key));
    if (keys.size !== positions.length)
      throw new Error('offset commit batch holds the same subscription partition twice');
    // Rows are locked in one order (subscription, topic, partition), the order a seek locks them in: a commit and a
    // seek of the same subscription wait for each other instead of deadlocking.
    const rows = [...positions].sort(byRow);
    const result: {
      subscription_id: string;
      topic: string;
      partition: number;
      applied: boolean;
      exists: boolean;
      current_offset: string | null;
      current_epoch: string | null;
      current_generation: string | null;
    }[] = await manager.query(
      `WITH input AS (
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[])
           AS t(subscription_id, topic, partition, next_offset, epoch, generation)
       ), applied AS (
         INSERT INTO subscription_offsets AS o (subscription_id, topic, partition, next_offset, epoch, generation, updated_at)
         SELECT i.subscription_id, i.topic, i.partition, i.next_offset, i.epoch, i.generation, now()
           FROM input i JOIN subscriptions s ON s.id = i.subscription_id
           -- Holds the subscription row until commit, so a concurrent delete cannot break the foreign key.
           FOR KEY SHARE OF s
         ON CONFLICT (subscription_id, topic, partition) DO UPDATE
           SET next_offset = EXCLUDED.next_offset, epoch = GREATEST(o.epoch, EXCLUDED.epoch),
               generation = GREATEST(o.generation, EXCLUDED.generation), updated_at = now()
           WHERE o.next_offset <= EXCLUDED.next_offset AND (EXCLUDED.epoch = 0 OR o.epoch <= EXCLUDED.epoch)
             AND o.generation <= EXCLUDED.generation
         RETURNING o.subscription_id, o.topic, o.partition
       )
       SELECT i.subscription_id, i.topic, i.partition,
              (a.subscription_id IS NOT NULL) AS applied,
              EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = i.subscription_id) AS exists,
              cur.next_offset AS current_offset, cur.epoch AS current_epoch, cur.generation AS current_generation
         FROM input i
         LEFT JOIN applied a USING (subscription_id, topic, partition)
         LEFT JOIN subscription_offsets cur USING (subscription_id, topic, partition)`,
      [
        rows.map((r) => r.subscriptionId),
        rows.map((r) => r.topic),
        rows.map((r) => r.partition),
        rows.map((r) => r.nextOffset),
        rows.map((r) => r.epoch),
        rows.map((r) => r.generation ?? 0),
      ],
    );
    const byKey = new Map(
      result.map((r) => [key({ subscriptionId: r.subscription_id, topic: r.topic, partition: r.partition }), r]),
    );
    return positions.map((position) => {
      const r = byKey.get(key(position));
      if (!r) throw new Error(`offset commit returned no row for ${key(position)}`);
      const current =
        r.current_offset === null
          ? undefined
          : {
              nextOffset: Number(r.current_offset),
              epoch: Number(r.current_epoch),
              generation: Number(r.current_generation),
            };
      if (r.applied) return { position, applied: true, current };
      // `current` is read in the statement's snapshot: a seek that committed while the upsert waited for the row is
      // not in it. The refusal then reads BACKWARDS, and the loop's next refresh sees the new generation anyway.
      const rejected: OffsetRejection = !r.exists
        ? 'SUBSCRIPTION_GONE'
        : current && position.epoch > 0 && current.epoch > position.epoch
          ? 'STALE_EPOCH'
          : current && current.generation > (position.generation ?? 0)
            ? 'SEEKED'
            : 'BACKWARDS';
      return { position, applied: false, rejected, current };
    });
  }

  /**
   * The one write that may move an offset backwards: after the Kafka log itself went backwards (a topic deleted
   * and recreated), so the stored offset points past its end. Still refused for an older epoch, and by a row an
   * operator's seek wrote since the writer's generation.
   */
  async rewind(position: OffsetPosition, manager: EntityManager = this.db.manager): Promise<boolean> {
    const result: unknown[] = await manager.query(
      `UPDATE subscription_offsets SET next_offset = $4, epoch = GREATEST(epoch, $5), updated_at = now()
        WHERE subscription_id = $1 AND topic = $2 AND partition = $3 AND ($5 = 0 OR epoch <= $5) AND generation <= $6 RETURNING 1`,
      [
        position.subscriptionId,
        position.topic,
        position.partition,
        position.nextOffset,
        position.epoch,
        position.generation ?? 0,
      ],
    );
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    return Number(result[1] ?? 0) > 0;
  }

  /**
   * The stored positions of the given subscriptions (all partitions); in the caller's transaction when given one.
   * `generation` is the subscription's offsets generation, read in the same statement as the offsets: a lane
   * started from a position and that generation never holds a position from before a seek with the generation
   * after it.
   */
  async positionsOf(subscriptionIds: string[], manager: EntityManager = this.db.manager): Promise<OffsetPosition[]> {
    if (subscriptionIds.length === 0) return [];
    const rows: {
      subscription_id: string;
      topic: string;
      partition: number;
      next_offset: string;
      epoch: string;
      generation: string;
    }[] = await manager.query(
      `SELECT o.subscription_id, o.topic, o.partition, o.next_offset, o.epoch, s.offsets_generation AS generation
           FROM subscription_offsets o JOIN subscriptions s ON s.id = o.subscription_id
          WHERE o.subscription_id = ANY($1::uuid[])`,
      [subscriptionIds],
    );
    return rows.map((r) => ({
      subscriptionId: r.subscription_id,
      topic: r.topic,
      partition: r.partition,
      nextOffset: Number(r.next_offset),
      epoch: Number(r.epoch),
      generation: Number(r.generation),
    }));
  }

  /**
   * An operator's seek: sets the subscription's next offset in each given partition, wherever it was (forward or
   * back), and raises its offsets generation, in the caller's transaction. The row keeps its epoch (the partition's
   * owner still writes it); its generation becomes the new one, so every commit of a lane that started before
   * the seek is refused from now on (`SEEKED`), and the loops restart those lanes from here. The subscription row
   * is locked first, so two seeks of one subscription apply one after the other. Refused only for a deleted
   * subscription.
   */
  async seek(
    subscriptionId: string,
    targets: readonly { topic: string; partition: number; nextOffset: number }[],
    manager: EntityManager,
  ): Promise<SeekResult> {
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    const [bumped]: [{ offsets_generation: string }[], number] = await manager.query(
      `UPDATE subscriptions SET offsets_generation = offsets_generation + 1 WHERE id = $1 RETURNING offsets_generation`,
      [subscriptionId],
    );
    if (bumped.length === 0) return { applied: false, rejected: 'SUBSCRIPTION_GONE' };
    const generation = Number(bumped[0].offsets_generation);
    const before: { topic: string; partition: number; next_offset: string }[] = await manager.query(
      `SELECT topic, partition, next_offset FROM subscription_offsets WHERE subscription_id = $1 ORDER BY topic, partition FOR UPDATE`,
      [subscriptionId],
    );
    targets = [...targets].sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition));
    const was = new Map(before.map((r) => [`${r.topic}#${r.partition}`, Number(r.next_offset)]));
    await manager.query(
      `INSERT INTO subscription_offsets AS o (subscription_id, topic, partition, next_offset, epoch, generation, updated_at)
       SELECT $1, t.topic, t.partition, t.next_offset, 0, $5, now()
         FROM unnest($2::text[], $3::int[], $4::bigint[]) AS t(topic, partition, next_offset)
       ON CONFLICT (subscription_id, topic, partition) DO UPDATE
         SET next_offset = EXCLUDED.next_offset, generation = EXCLUDED.generation, updated_at = now()`,
      [
        subscriptionId,
        targets.map((t) => t.topic),
        targets.map((t) => t.partition),
        targets.map((t) => t.nextOffset),
        generation,
      ],
    );
    const moves = targets.map((t) => ({
      topic: t.topic,
      partition: t.partition,
      from: was.get(`${t.topic}#${t.partition}`) ?? null,
      to: t.nextOffset,
    }));
    return { applied: true, generation, moves };
  }
}

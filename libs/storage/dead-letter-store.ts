import type { DataSource, EntityManager } from 'typeorm';
import { DeadLetterFilter, deadLetterFilterSql } from './dead-letter-filter';
import { DeadLetterEntity } from './entities';

export interface DeadLetter {
  subscriptionId: string;
  topic: string;
  partition: number;
  offset: number;
  eventId: string;
  attributes: Record<string, unknown>;
  data: Buffer | null;
  attempts: number;
  lastError: string;
  firstFailedAt: Date;
  lastFailedAt: Date;
}

/** Where a dead letter sits in the log: its key (one dead letter per subscription and position). */
export type DeadLetterPosition = Pick<DeadLetter, 'subscriptionId' | 'topic' | 'partition' | 'offset'>;

/** Where a lane starts: the next offset its subscription has not settled in a partition. */
export interface LaneStart {
  subscriptionId: string;
  topic: string;
  partition: number;
  nextOffset: number;
}

/** `ALREADY_DEAD_LETTERED`: the position has a dead letter already (kept as it was). */
export type DeadLetterRejection = 'ALREADY_DEAD_LETTERED' | 'SUBSCRIPTION_GONE';

export interface DeadLetterWriteResult {
  position: DeadLetterPosition;
  written: boolean;
  /** Why nothing was written; absent when written. */
  rejected?: DeadLetterRejection;
}

const key = (p: { subscriptionId: string; topic: string; partition: number; offset: number }) =>
  `${p.subscriptionId}\u0000${p.topic}\u0000${p.partition}\u0000${p.offset}`;

/** Most rows one retention statement deletes: a run never holds locks on a large part of the table. */
export const DEAD_LETTER_PURGE_BATCH = 500;

/**
 * The dead-letter queue in Postgres: an event a subscription will not get, with why and when. One dead letter per
 * subscription and log position (topic, partition, offset), so writing one is idempotent: a dispatch loop that
 * crashed after the write and before its offset commit writes the same letter again on replay, and the first one
 * stays. Dead letters go with their subscription (foreign key, ON DELETE CASCADE) and after the retention period
 * ({@link purgeOlderThan}).
 */
export class DeadLetterStore {
  constructor(private readonly db: DataSource) {}

  /**
   * Writes the letters whose position has none yet, in one statement; durable once this resolves (its own
   * transaction, or the caller's `manager`). Each takes its subscription's tenant. A position already dead-lettered keeps its first letter
   * (`ALREADY_DEAD_LETTERED`); a letter of a deleted subscription is not written (`SUBSCRIPTION_GONE`).
   */
  async add(letters: DeadLetter[], manager: EntityManager = this.db.manager): Promise<DeadLetterWriteResult[]> {
    if (letters.length === 0) return [];
    const written: { subscription_id: string; topic: string; partition: number; kafka_offset: string }[] =
      await manager.query(
        `WITH input AS (
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::bigint[], $5::text[], $6::jsonb[], $7::bytea[],
                              $8::int[], $9::text[], $10::timestamptz[], $11::timestamptz[]) WITH ORDINALITY
           AS t(subscription_id, topic, partition, kafka_offset, event_id, attributes, data, attempts, last_error,
                first_failed_at, last_failed_at, ord)
       )
       INSERT INTO dead_letters (subscription_id, tenant, topic, partition, kafka_offset, event_id, attributes, data,
                                 attempts, last_error, first_failed_at, last_failed_at)
       -- A letter belongs to its subscription's tenant.
       SELECT i.subscription_id, s.tenant, i.topic, i.partition, i.kafka_offset, i.event_id, i.attributes, i.data,
              i.attempts, i.last_error, i.first_failed_at, i.last_failed_at
         FROM input i JOIN subscriptions s ON s.id = i.subscription_id
         -- Holds the subscription row until commit, so a concurrent delete cannot break the foreign key.
         -- In the caller's order, so ids (the order listFor shows) follow it.
         ORDER BY i.ord
         FOR KEY SHARE OF s
       ON CONFLICT (subscription_id, topic, partition, kafka_offset) DO NOTHING
       RETURNING subscription_id, topic, partition, kafka_offset`,
        [
          letters.map((l) => l.subscriptionId),
          letters.map((l) => l.topic),
          letters.map((l) => l.partition),
          letters.map((l) => l.offset),
          letters.map((l) => l.eventId),
          letters.map((l) => JSON.stringify(l.attributes)),
          letters.map((l) => l.data),
          letters.map((l) => l.attempts),
          letters.map((l) => l.lastError),
          letters.map((l) => l.firstFailedAt),
          letters.map((l) => l.lastFailedAt),
        ],
      );
    const done = new Set(
      written.map((r) =>
        key({
          subscriptionId: r.subscription_id,
          topic: r.topic,
          partition: r.partition,
          offset: Number(r.kafka_offset),
        }),
      ),
    );
    const missing = letters.filter((l) => !done.has(key(l)));
    const gone = missing.length === 0 ? new Set<string>() : await this.missingSubscriptions(missing, manager);
    // The same position twice in one call: the first is written, the others are duplicates of it.
    const seen = new Set<string>();
    return letters.map((l) => {
      const position = { subscriptionId: l.subscriptionId, topic: l.topic, partition: l.partition, offset: l.offset };
      const k = key(l);
      const first = !seen.has(k);
      seen.add(k);
      if (done.has(k) && first) return { position, written: true };
      return {
        position,
        written: false,
        rejected: gone.has(l.subscriptionId) ? 'SUBSCRIPTION_GONE' : 'ALREADY_DEAD_LETTERED',
      };
    });
  }

  private async missingSubscriptions(letters: DeadLetter[], manager: EntityManager): Promise<Set<string>> {
    const ids = [...new Set(letters.map((l) => l.subscriptionId))];
    const found: { id: string }[] = await manager.query(`SELECT id FROM subscriptions WHERE id = ANY($1::uuid[])`, [
      ids,
    ]);
    const present = new Set(found.map((r) => r.id));
    return new Set(ids.filter((id) => !present.has(id)));
  }

  /**
   * For each lane start, the dead-lettered offsets at or after it, in one statement, in offset order. A lane
   * starting at its committed offset replays those events from Kafka; they were dead-lettered after the last commit
   * (before a crash), so they are settled and must be neither delivered nor dead-lettered again.
   */
  async deadLetteredFrom(starts: LaneStart[], manager: EntityManager = this.db.manager): Promise<DeadLetterPosition[]> {
    if (starts.length === 0) return [];
    const rows: { subscription_id: string; topic: string; partition: number; kafka_offset: string }[] =
      await manager.query(
        `SELECT d.subscription_id, d.topic, d.partition, d.kafka_offset
         FROM unnest($1::uuid[], $2::text[], $3::int[], $4::bigint[]) AS p(subscription_id, topic, partition, next_offset)
         JOIN dead_letters d ON d.subscription_id = p.subscription_id AND d.topic = p.topic
                            AND d.partition = p.partition AND d.kafka_offset >= p.next_offset
        ORDER BY d.subscription_id, d.topic, d.partition, d.kafka_offset`,
        [
          starts.map((s) => s.subscriptionId),
          starts.map((s) => s.topic),
          starts.map((s) => s.partition),
          starts.map((s) => s.nextOffset),
        ],
      );
    return rows.map((r) => ({
      subscriptionId: r.subscription_id,
      topic: r.topic,
      partition: r.partition,
      offset: Number(r.kafka_offset),
    }));
  }

  /**
   * Retention: deletes at most `limit` dead letters written before `cutoff`, oldest first, and says how many it
   * deleted. The caller repeats while a full batch comes back, so one call never runs long.
   */
  async purgeOlderThan(cutoff: Date, limit = DEAD_LETTER_PURGE_BATCH): Promise<number> {
    const result: unknown[] = await this.db.query(
      `DELETE FROM dead_letters WHERE id IN (
         SELECT id FROM dead_letters WHERE created_at < $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
       ) RETURNING 1`,
      [cutoff, limit],
    );
    // TypeORM answers a DELETE ... RETURNING on Postgres with [rows, affected].
    return Number(result[1] ?? 0);
  }

  /**
   * One page of a subscription's dead letters of `tenant` that match `filter`, in the order written (id order),
   * starting after the letter `afterId` (keyset paging: a page never shifts when letters are added or deleted).
   * Without their data. `next`: the id to continue after, absent on the last page.
   */
  async browse(
    subscriptionId: string,
    tenant: string,
    filter: DeadLetterFilter,
    page: { afterId?: string; limit: number },
  ): Promise<{ letters: DeadLetterRow[]; next?: string }> {
    const params: unknown[] = [subscriptionId, tenant, page.afterId ?? '0', page.limit + 1];
    const rows: DeadLetterRow[] = await this.db.query(
      `SELECT ${ROW_COLUMNS} FROM dead_letters d
        WHERE d.subscription_id = $1 AND d.tenant = $2 AND d.id > $3::bigint ${deadLetterFilterSql(filter, params)}
        ORDER BY d.id LIMIT $4`,
      params,
    );
    const more = rows.length > page.limit;
    const letters = more ? rows.slice(0, page.limit) : rows;
    return more ? { letters, next: letters[letters.length - 1].id } : { letters };
  }

  /** One dead letter of a subscription of `tenant`, with its data; undefined when it has none by that id. */
  async findOne(
    subscriptionId: string,
    tenant: string,
    id: string,
  ): Promise<(DeadLetterRow & { data: Buffer | null }) | undefined> {
    if (!/^\d{1,19}$/.test(id)) return undefined;
    const rows: (DeadLetterRow & { data: Buffer | null })[] = await this.db.query(
      `SELECT ${ROW_COLUMNS}, d.data FROM dead_letters d WHERE d.subscription_id = $1 AND d.tenant = $2 AND d.id = $3::bigint`,
      [subscriptionId, tenant, id],
    );
    return rows[0];
  }

  /**
   * Deletes the dead letters of a subscription of `tenant` that match `filter` (an operator's purge), in batches of
   * at most `batch` rows, each its own statement; answers how many it deleted. A letter a replay is sending at the
   * moment may go too: the replay then counts it as skipped.
   */
  async purgeMatching(
    subscriptionId: string,
    tenant: string,
    filter: DeadLetterFilter,
    batch = DEAD_LETTER_PURGE_BATCH,
  ): Promise<number> {
    let deleted = 0;
    for (;;) {
      const params: unknown[] = [subscriptionId, tenant, batch];
      const result: unknown[] = await this.db.query(
        `DELETE FROM dead_letters WHERE id IN (
           SELECT d.id FROM dead_letters d WHERE d.subscription_id = $1 AND d.tenant = $2 ${deadLetterFilterSql(filter, params)}
            ORDER BY d.id LIMIT $3 FOR UPDATE SKIP LOCKED
         ) RETURNING 1`,
        params,
      );
      const n = Number(result[1] ?? 0);
      deleted += n;
      if (n < batch) return deleted;
    }
  }

  /** A subscription's dead letters of `tenant`, oldest first (in the order written). */
  async listFor(subscriptionId: string, tenant: string, limit = 1000): Promise<DeadLetterEntity[]> {
    return this.db.manager.find(DeadLetterEntity, {
      where: { subscriptionId, tenant },
      order: { createdAt: 'ASC', id: 'ASC' },
      take: limit,
    });
  }
}

/** A dead letter as browsing shows it (its data left out). Ids are bigints, as text. */
export interface DeadLetterRow {
  id: string;
  topic: string;
  partition: number;
  offset: string;
  eventId: string;
  attributes: Record<string, unknown>;
  attempts: number;
  lastError: string;
  firstFailedAt: Date;
  lastFailedAt: Date;
  deadLetteredAt: Date;
  replayedAt: Date | null;
  replayId: string | null;
}

const ROW_COLUMNS = `d.id::text AS id, d.topic, d.partition, d.kafka_offset::text AS "offset", d.event_id AS "eventId",
  d.attributes, d.attempts, d.last_error AS "lastError", d.first_failed_at AS "firstFailedAt",
  d.last_failed_at AS "lastFailedAt", d.created_at AS "deadLetteredAt", d.replayed_at AS "replayedAt",
  CASE WHEN d.replayed_at IS NULL THEN NULL ELSE d.replay_id END AS "replayId"`;

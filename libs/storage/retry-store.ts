import type { DataSource, EntityManager } from 'typeorm';
import { MoreThanOrEqual } from 'typeorm';
import { DeliveryRetryEntity } from './entities';
import type { DeadLetter, DeadLetterStore } from './dead-letter-store';

export interface ParkedDelivery {
  subscriptionId: string;
  topic: string;
  partition: number;
  offset: number;
  attributes: Record<string, unknown>;
  data: Buffer | null;
  attempts: number;
  lastError: string;
  firstFailedAt: Date;
  nextAttemptAt: Date;
  epoch: number;
}

/**
 * What a park did. `PARKED`: the delivery is in the table now. `ALREADY_PARKED`: it was (a redelivery after a
 * crash); the first parking stands.
 */
export type ParkOutcome = 'PARKED' | 'ALREADY_PARKED';

/** Why a park wrote nothing: the subscription holds its cap of parked deliveries, or no longer exists. */
export type ParkRejection = 'AT_CAP' | 'SUBSCRIPTION_GONE';

export interface ParkResult {
  delivery: ParkedDelivery;
  applied: boolean;
  outcome?: ParkOutcome;
  rejected?: ParkRejection;
  /** The subscription's parked deliveries after the write, counted up to the cap (0 when there is no cap). */
  parked: number;
}

type Key = Pick<ParkedDelivery, 'subscriptionId' | 'topic' | 'partition' | 'offset'>;

const where = (k: Key) => ({
  subscriptionId: k.subscriptionId,
  position: { topic: k.topic, partition: k.partition, offset: k.offset },
});

/**
 * The retry table: deliveries that failed and wait for a later attempt. A delivery is parked durably before the
 * subscription's offset moves past it; it leaves the table when the sink acknowledges it, or for the dead-letter
 * queue after the last attempt (one transaction, so it is never in neither).
 */
export class RetryStore {
  constructor(
    private readonly db: DataSource,
    private readonly deadLetters: DeadLetterStore,
  ) {}

  /**
   * Parks a delivery; durable once this resolves (in the caller's transaction `manager`, or its own). Parking the
   * same delivery twice (a redelivery after a crash) keeps the first: `ALREADY_PARKED`. With `maxParked`, a
   * subscription that holds that many parked deliveries already gets no more: `AT_CAP`, and the caller keeps the
   * event (docs/delivery.md, the overflow policy). Parks of one subscription are serialised on its row, so
   * concurrent lanes cannot overshoot the cap; the count stops at the cap, so it costs at most `maxParked` index
   * entries, and only on the failure path (a delivery that succeeds never parks).
   */
  async park(delivery: ParkedDelivery, manager?: EntityManager, maxParked = Infinity): Promise<ParkResult> {
    const write = async (tx: EntityManager): Promise<ParkResult> => {
      const cap = Number.isFinite(maxParked) ? maxParked : null;
      const held: { tenant: string }[] = await tx.query(
        `SELECT tenant FROM subscriptions WHERE id = $1 FOR NO KEY UPDATE`,
        [delivery.subscriptionId],
      );
      if (held.length === 0) return { delivery, applied: false, rejected: 'SUBSCRIPTION_GONE', parked: 0 };
      // A parked delivery belongs to its subscription's tenant.
      const tenant = held[0].tenant;
      const [row]: { counted: number; already: boolean; written: boolean }[] = await tx.query(
        `WITH counted AS (
           SELECT CASE WHEN $11::int IS NULL THEN 0
                       ELSE (SELECT count(*)::int FROM (SELECT 1 FROM delivery_retries WHERE subscription_id = $1 LIMIT $11) c) END AS n
         ), already AS (
           SELECT 1 FROM delivery_retries WHERE subscription_id = $1 AND topic = $2 AND partition = $3 AND kafka_offset = $4
         ), written AS (
           INSERT INTO delivery_retries
                  (subscription_id, topic, partition, kafka_offset, attributes, data, attempts, last_error, first_failed_at, next_attempt_at, epoch, tenant)
           SELECT $1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, $12, $13
            WHERE NOT EXISTS (SELECT 1 FROM already) AND ($11::int IS NULL OR (SELECT n FROM counted) < $11)
           ON CONFLICT DO NOTHING
           RETURNING 1
         )
         SELECT (SELECT n FROM counted) AS counted, EXISTS (SELECT 1 FROM already) AS already, EXISTS (SELECT 1 FROM written) AS written`,
        [
          delivery.subscriptionId,
          delivery.topic,
          delivery.partition,
          delivery.offset,
          JSON.stringify(delivery.attributes),
          delivery.data,
          delivery.attempts,
          delivery.lastError,
          delivery.firstFailedAt,
          delivery.nextAttemptAt,
          cap,
          delivery.epoch,
          tenant,
        ],
      );
      if (row.already) return { delivery, applied: true, outcome: 'ALREADY_PARKED', parked: row.counted };
      if (row.written) return { delivery, applied: true, outcome: 'PARKED', parked: row.counted + 1 };
      return { delivery, applied: false, rejected: 'AT_CAP', parked: row.counted };
    };
    if (manager?.queryRunner?.isTransactionActive) return write(manager);
    return (manager ?? this.db.manager).transaction(write);
  }

  /**
   * Deliveries of the given subscriptions whose next attempt is due, oldest first, at most `perSubscription` of
   * each: one subscription with a dead sink and a long backlog does not crowd out the others' retries.
   */
  async due(
    subscriptionIds: string[],
    limit: number,
    perSubscription = 8,
    only?: { topic: string; partition: number },
  ): Promise<ParkedDelivery[]> {
    if (subscriptionIds.length === 0) return [];
    const rows: RetryRow[] = await this.db.query(
      `SELECT * FROM (
         SELECT r.*, row_number() OVER (PARTITION BY subscription_id ORDER BY next_attempt_at) AS rank
           FROM delivery_retries r
          WHERE subscription_id = ANY($1::uuid[]) AND next_attempt_at <= now()
            AND ($4::text IS NULL OR (topic = $4 AND partition = $5))
       ) ranked
        WHERE rank <= $2
        ORDER BY next_attempt_at
        LIMIT $3`,
      [subscriptionIds, perSubscription, limit, only?.topic ?? null, only?.partition ?? null],
    );
    return rows.map(parkedOf);
  }

  /**
   * A subscription partition's parked deliveries in offset order, due or not, after `afterOffset`: the backlog a
   * lane delivers first, in order, when its sink comes back (ordered recovery, docs/delivery.md).
   */
  async backlogOf(
    lane: { subscriptionId: string; topic: string; partition: number },
    limit: number,
    afterOffset = -1,
  ): Promise<ParkedDelivery[]> {
    const rows: RetryRow[] = await this.db.query(
      `SELECT * FROM delivery_retries
        WHERE subscription_id = $1 AND topic = $2 AND partition = $3 AND kafka_offset > $4
        ORDER BY kafka_offset
        LIMIT $5`,
      [lane.subscriptionId, lane.topic, lane.partition, afterOffset, limit],
    );
    return rows.map(parkedOf);
  }

  async reschedule(
    key: Key,
    attempts: number,
    nextAttemptAt: Date,
    lastError: string,
    manager: EntityManager = this.db.manager,
  ): Promise<void> {
    await manager.update(DeliveryRetryEntity, where(key), { attempts, nextAttemptAt, lastError });
  }

  async delivered(key: Key, manager: EntityManager = this.db.manager): Promise<void> {
    await manager.delete(DeliveryRetryEntity, where(key));
  }

  /** Moves a parked delivery to the dead-letter queue, in one transaction (its own, or the caller's `manager`). */
  async deadLetter(letter: DeadLetter, manager?: EntityManager): Promise<void> {
    const move = async (tx: EntityManager) => {
      await this.deadLetters.add([letter], tx);
      await tx.delete(DeliveryRetryEntity, where(letter));
    };
    if (manager) await move(manager);
    else await this.db.transaction(move);
  }

  /** Forgets the parked deliveries of a subscription partition from an offset on (the log itself was rewound). */
  async forgetFrom(
    subscriptionId: string,
    topic: string,
    partition: number,
    offset: number,
    manager: EntityManager = this.db.manager,
  ): Promise<void> {
    await manager.delete(DeliveryRetryEntity, {
      subscriptionId,
      position: { topic, partition, offset: MoreThanOrEqual(offset) },
    });
  }

  /**
   * Forgets, for each position, the parked deliveries at or after it. A lane that starts at its committed offset
   * replays those events from Kafka anyway (they were parked after the last commit, before a crash), so the
   * parked copies would only be sent twice (an operator's seek forgets them the same way). One statement for all
   * the positions; answers how many it forgot.
   */
  async forgetReplayed(
    positions: { subscriptionId: string; topic: string; partition: number; nextOffset: number }[],
    manager: EntityManager = this.db.manager,
  ): Promise<number> {
    if (positions.length === 0) return 0;
    const result: unknown[] = await manager.query(
      `DELETE FROM delivery_retries r
        USING unnest($1::uuid[], $2::text[], $3::int[], $4::bigint[]) AS p(subscription_id, topic, partition, next_offset)
        WHERE r.subscription_id = p.subscription_id AND r.topic = p.topic AND r.partition = p.partition
          AND r.kafka_offset >= p.next_offset`,
      [
        positions.map((p) => p.subscriptionId),
        positions.map((p) => p.topic),
        positions.map((p) => p.partition),
        positions.map((p) => p.nextOffset),
      ],
    );
    // TypeORM answers a DELETE on Postgres with [rows, affected].
    return Number(result[1] ?? 0);
  }

  async countFor(subscriptionId: string): Promise<number> {
    return this.db.manager.count(DeliveryRetryEntity, { where: { subscriptionId } });
  }
}

interface RetryRow {
  subscription_id: string;
  topic: string;
  partition: number;
  kafka_offset: string;
  attributes: Record<string, unknown>;
  data: Buffer | null;
  attempts: number;
  last_error: string;
  first_failed_at: Date;
  next_attempt_at: Date;
  epoch: string;
}

function parkedOf(r: RetryRow): ParkedDelivery {
  return {
    subscriptionId: r.subscription_id,
    topic: r.topic,
    partition: r.partition,
    offset: Number(r.kafka_offset),
    attributes: r.attributes,
    data: r.data,
    attempts: r.attempts,
    lastError: r.last_error,
    firstFailedAt: r.first_failed_at,
    nextAttemptAt: r.next_attempt_at,
    epoch: Number(r.epoch),
  };
}

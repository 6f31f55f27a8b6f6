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

type Key = Pick<ParkedDelivery, 'subscriptionId' | 'topic' | 'partition' | 'offset'>;

const where = (k: Key) => ({ subscriptionId: k.subscriptionId, topic: k.topic, partition: k.partition, kafkaOffset: k.offset });

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

  /** Durable once this resolves. Parking the same delivery twice (a redelivery after a crash) keeps the first. */
  async park(delivery: ParkedDelivery, manager: EntityManager = this.db.manager): Promise<void> {
    await manager
      .createQueryBuilder()
      .insert()
      .into(DeliveryRetryEntity)
      .values({ ...where(delivery), ...rest(delivery) })
      .orIgnore()
      .execute();
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
    const rows: {
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
    }[] = await this.db.query(
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
    return rows.map((r) => ({
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
    }));
  }

  async reschedule(key: Key, attempts: number, nextAttemptAt: Date, lastError: string, manager: EntityManager = this.db.manager): Promise<void> {
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
  async forgetFrom(subscriptionId: string, topic: string, partition: number, offset: number, manager: EntityManager = this.db.manager): Promise<void> {
    await manager.delete(DeliveryRetryEntity, { subscriptionId, topic, partition, kafkaOffset: MoreThanOrEqual(offset) });
  }

  /**
   * Forgets, for each position, the parked deliveries at or after it. A lane that starts at its committed offset
   * replays those events from Kafka anyway (they were parked after the last commit, before a crash), so the
   * parked copies would only be sent twice. One statement for all the positions.
   */
  async forgetReplayed(
    positions: { subscriptionId: string; topic: string; partition: number; nextOffset: number }[],
    manager: EntityManager = this.db.manager,
  ): Promise<void> {
    if (positions.length === 0) return;
    await manager.query(
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
  }

  async countFor(subscriptionId: string): Promise<number> {
    return this.db.manager.count(DeliveryRetryEntity, { where: { subscriptionId } });
  }
}

function rest(d: ParkedDelivery) {
  return {
    attributes: d.attributes as object,
    data: d.data,
    attempts: d.attempts,
    lastError: d.lastError,
    firstFailedAt: d.firstFailedAt,
    nextAttemptAt: d.nextAttemptAt,
    epoch: d.epoch,
  };
}

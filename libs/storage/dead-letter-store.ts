import type { DataSource, EntityManager } from 'typeorm';
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

/** The dead-letter queue in Postgres: an event a subscription will not get, with why and when. */
export class DeadLetterStore {
  constructor(private readonly db: DataSource) {}

  /** Durable once this resolves (its own transaction, or the caller's `manager`). */
  async add(letters: DeadLetter[], manager: EntityManager = this.db.manager): Promise<void> {
    if (letters.length === 0) return;
    await manager.insert(
      DeadLetterEntity,
      letters.map((l) => ({
        subscriptionId: l.subscriptionId,
        topic: l.topic,
        partition: l.partition,
        kafkaOffset: l.offset,
        eventId: l.eventId,
        attributes: l.attributes as DeadLetterEntity['attributes'],
        data: l.data,
        attempts: l.attempts,
        lastError: l.lastError,
        firstFailedAt: l.firstFailedAt,
        lastFailedAt: l.lastFailedAt,
      })),
    );
  }

  /** A subscription's dead letters, oldest first. */
  async listFor(subscriptionId: string, limit = 1000): Promise<DeadLetterEntity[]> {
    return this.db.manager.find(DeadLetterEntity, { where: { subscriptionId }, order: { createdAt: 'ASC' }, take: limit });
  }
}

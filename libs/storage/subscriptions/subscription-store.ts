import type { DataSource, EntityManager } from 'typeorm';
import type { QueryDeepPartialEntity } from 'typeorm/query-builder/QueryPartialEntity';
import { SubscriptionEntity, SubscriptionOffsetEntity } from '../entities';

/** A subscription as created, and the offset it starts from in each partition of its topic. */
export type NewSubscription = Omit<SubscriptionEntity, 'offsetsGeneration' | 'createdAt' | 'updatedAt'>;

/** What replacing a subscription changes (its topic and offsets never change). */
export type SubscriptionReplacement = Pick<SubscriptionEntity, 'sink' | 'filters' | 'config'> &
  Partial<Pick<SubscriptionEntity, 'signingSecret'>>;

/**
 * The `subscriptions` table (libs/subscriptions decides what is written): the subscriptions of each tenant, their
 * starting offsets, an operator's pause and resume, and the runtime topics subscribed to.
 */
export class SubscriptionStore {
  constructor(private readonly db: DataSource) {}

  /** Sets the tenant's subscription from status `from` to `to`; false when it is not the tenant's, or not in `from`. */
  async moveStatus(id: string, tenant: string, from: string, to: string): Promise<boolean> {
    const moved: unknown[] = await this.db.query(
      `UPDATE subscriptions SET status = $4, updated_at = now() WHERE id = $1 AND tenant = $2 AND status = $3 RETURNING 1`,
      [id, tenant, from, to],
    );
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected].
    return Number(moved[1] ?? 0) > 0;
  }

  /** The status of the tenant's subscription; undefined when the tenant has none by that id. */
  async statusOf(id: string, tenant: string): Promise<string | undefined> {
    const rows: { status: string }[] = await this.db.query(
      `SELECT status FROM subscriptions WHERE id = $1 AND tenant = $2`,
      [id, tenant],
    );
    return rows[0]?.status;
  }

  /** Whether any subscription, of any status, reads the topic. */
  async anyOn(topic: string): Promise<boolean> {
    const [{ observed }]: { observed: boolean }[] = await this.db.query(
      'SELECT EXISTS (SELECT 1 FROM subscriptions WHERE topic = $1) AS observed',
      [topic],
    );
    return observed;
  }

  /** The topics an active subscription reads that look made at runtime (`a2a.%`, `tenant.%`), any tenant's. */
  async activeRuntimeTopicCandidates(): Promise<string[]> {
    const rows: { topic: string }[] = await this.db.query(
      `SELECT DISTINCT topic FROM subscriptions
        WHERE status = 'ACTIVE' AND (topic LIKE 'a2a.%' OR topic LIKE 'tenant.%') ORDER BY topic`,
    );
    return rows.map((r) => r.topic);
  }

  /** Inserts the subscription and its starting offsets (`starts`: partition -> next offset) in one transaction. */
  async create(subscription: NewSubscription, starts: Iterable<[number, number]>): Promise<void> {
    await this.db.transaction(async (tx) => {
      // A jsonb column's type (config: a record) is wider than TypeORM's deep-partial type of it.
      await tx.insert(SubscriptionEntity, subscription as QueryDeepPartialEntity<SubscriptionEntity>);
      await tx.insert(
        SubscriptionOffsetEntity,
        [...starts].map(([partition, nextOffset]) => ({
          subscriptionId: subscription.id,
          log: { topic: subscription.topic, partition },
          nextOffset,
          epoch: 0,
        })),
      );
    });
  }

  /** The tenant's subscription by id; null when it has none. */
  get(id: string, tenant: string): Promise<SubscriptionEntity | null> {
    return this.db.manager.findOneBy(SubscriptionEntity, { id, tenant });
  }

  /** A subscription by id, whichever tenant's (the runtime's own reads). */
  async byId(id: string): Promise<SubscriptionEntity | undefined> {
    return (await this.db.manager.findOneBy(SubscriptionEntity, { id })) ?? undefined;
  }

  /** The topic of the tenant's subscription; undefined when it has none by that id. */
  async topicOf(id: string, tenant: string): Promise<string | undefined> {
    const row = await this.db.manager.findOne(SubscriptionEntity, { select: { topic: true }, where: { id, tenant } });
    return row?.topic;
  }

  /** The tenant's subscription named `name`; null when it has none. */
  byName(name: string, tenant: string): Promise<SubscriptionEntity | null> {
    return this.db.manager.findOneBy(SubscriptionEntity, { name, tenant });
  }

  /** The tenant's subscriptions, oldest first; only the one named `name` when given. */
  list(tenant: string, name?: string): Promise<SubscriptionEntity[]> {
    return this.db.manager.find(SubscriptionEntity, {
      where: name === undefined ? { tenant } : { tenant, name },
      order: { createdAt: 'ASC' },
    });
  }

  /** Replaces the tenant's subscription's sink, filters and config; false when it has none by that id. */
  async replace(id: string, tenant: string, replacement: SubscriptionReplacement): Promise<boolean> {
    const result = await this.db.manager.update(SubscriptionEntity, { id, tenant }, {
      ...replacement,
      updatedAt: new Date(),
    } as QueryDeepPartialEntity<SubscriptionEntity>);
    return Boolean(result.affected);
  }

  /** Deletes the tenant's subscription; false when it has none by that id. */
  async delete(id: string, tenant: string): Promise<boolean> {
    return Boolean((await this.db.manager.delete(SubscriptionEntity, { id, tenant })).affected);
  }

  /** Sets the subscription `DISABLED`, in the caller's transaction when given one. */
  async disable(id: string, manager: EntityManager = this.db.manager): Promise<void> {
    await manager.update(SubscriptionEntity, { id }, { status: 'DISABLED', updatedAt: new Date() });
  }

  /** Active subscriptions of a topic, whichever instance created them. */
  activeOnTopic(topic: string): Promise<SubscriptionEntity[]> {
    return this.db.manager.find(SubscriptionEntity, { where: { topic, status: 'ACTIVE' } });
  }

  /** Active subscriptions an instance dispatches. */
  activeFor(instanceId: string): Promise<SubscriptionEntity[]> {
    return this.db.manager.find(SubscriptionEntity, { where: { instanceId, status: 'ACTIVE' } });
  }

  /** How many subscriptions, of any status, read the topic. */
  countOn(topic: string): Promise<number> {
    return this.db.manager.countBy(SubscriptionEntity, { topic });
  }
}

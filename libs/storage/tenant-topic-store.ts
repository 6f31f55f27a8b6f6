import type { DataSource } from 'typeorm';
import { TenantTopicEntity, TopicGrantEntity } from './entities';

/** What a tenant asked for its new topic. */
export interface TenantTopicSpec {
  tenant: string;
  name: string;
  partitions: number;
  retentionMs: number | null;
}

/**
 * The `tenant_topics` table: each tenant's own topics. A name is taken (`reserve`) before its Kafka topic is made
 * and resolved once it is `ready`, so a publish never reaches a Kafka topic that does not exist yet.
 */
export class TenantTopicStore {
  constructor(private readonly db: DataSource) {}

  /**
   * Takes the name for the tenant unless it has `max` topics already: the count and the insert in one transaction
   * that holds the tenant's advisory lock, so creates at once on several instances cannot pass the cap.
   */
  async reserve(spec: TenantTopicSpec, max: number): Promise<'reserved' | 'exists' | 'limit'> {
    return this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('tenant_topics'), hashtext($1))`, [spec.tenant]);
      if (await tx.existsBy(TenantTopicEntity, { tenant: spec.tenant, name: spec.name })) return 'exists';
      if ((await tx.countBy(TenantTopicEntity, { tenant: spec.tenant })) >= max) return 'limit';
      await tx.insert(TenantTopicEntity, { ...spec, ready: false });
      return 'reserved';
    });
  }

  /** `partitions`: the count its Kafka topic has, once made (more than asked for a topic taken up again). */
  async setReady(tenant: string, name: string, ready: boolean, partitions?: number): Promise<void> {
    await this.db.manager.update(TenantTopicEntity, { tenant, name }, { ready, ...(partitions ? { partitions } : {}) });
  }

  /** Records what `PATCH /topics/{name}` made of its Kafka topic. */
  async configure(tenant: string, name: string, change: { partitions: number; retentionMs?: number }): Promise<void> {
    await this.db.manager.update(TenantTopicEntity, { tenant, name }, change);
  }

  async remove(tenant: string, name: string): Promise<void> {
    await this.db.manager.delete(TenantTopicEntity, { tenant, name });
  }

  /** The tenant's topic of that name, whether or not its Kafka topic is ready. */
  find(tenant: string, name: string): Promise<TenantTopicEntity | null> {
    return this.db.manager.findOneBy(TenantTopicEntity, { tenant, name });
  }

  /** Whether the tenant has a ready topic of that name (one indexed read: the publish path asks it). */
  isReady(tenant: string, name: string): Promise<boolean> {
    return this.db.manager.existsBy(TenantTopicEntity, { tenant, name, ready: true });
  }

  list(tenant: string): Promise<TenantTopicEntity[]> {
    return this.db.manager.find(TenantTopicEntity, { where: { tenant }, order: { name: 'ASC' } });
  }
}

/** The `topic_grants` table: which tenant may publish to, or subscribe to, which shared topic. */
export class TopicGrantStore {
  constructor(private readonly db: DataSource) {}

  /** Whether the grant is new (false: it existed, and is left as it was). */
  async grant(topic: string, tenant: string, action: string, grantedBy: string): Promise<boolean> {
    const rows: unknown[] = await this.db.query(
      `INSERT INTO topic_grants (topic, tenant, action, granted_by) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING RETURNING topic`,
      [topic, tenant, action, grantedBy],
    );
    return rows.length > 0;
  }

  /** Whether there was such a grant. */
  async revoke(topic: string, tenant: string, action: string): Promise<boolean> {
    return ((await this.db.manager.delete(TopicGrantEntity, { topic, tenant, action })).affected ?? 0) > 0;
  }

  has(topic: string, tenant: string, action: string): Promise<boolean> {
    return this.db.manager.existsBy(TopicGrantEntity, { topic, tenant, action });
  }

  list(topic: string): Promise<TopicGrantEntity[]> {
    return this.db.manager.find(TopicGrantEntity, { where: { topic }, order: { tenant: 'ASC', action: 'ASC' } });
  }
}

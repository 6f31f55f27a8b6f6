import type { DataSource } from 'typeorm';
import { PublisherSecretEntity } from '../entities';

/** The `publisher_secrets` table (libs/security/publisher-secrets.ts seals and opens the secrets). */
export class PublisherSecretRows {
  constructor(private readonly db: DataSource) {}

  /**
   * Stores the sealed secret unless the principal has `max` already: its creation time, or undefined (nothing
   * written). Two inserts for one principal at once must not both pass the count: they take turns.
   */
  async insertBelow(
    max: number,
    row: { id: string; tenant: string; principal: string; sealed: string },
  ): Promise<Date | undefined> {
    return this.db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        JSON.stringify(['publisher-secrets', row.tenant, row.principal]),
      ]);
      const count = await tx.count(PublisherSecretEntity, { where: { tenant: row.tenant, principal: row.principal } });
      if (count >= max) return undefined;
      const [inserted]: { created_at: Date }[] = await tx.query(
        'INSERT INTO publisher_secrets (id, tenant, principal, secret) VALUES ($1, $2, $3, $4) RETURNING created_at',
        [row.id, row.tenant, row.principal, row.sealed],
      );
      return inserted.created_at;
    });
  }

  /** The principal's secrets (without the secret), oldest first. */
  list(tenant: string, principal: string): Promise<Pick<PublisherSecretEntity, 'id' | 'principal' | 'createdAt'>[]> {
    return this.db.manager.find(PublisherSecretEntity, {
      select: { id: true, principal: true, createdAt: true },
      where: { tenant, principal },
      order: { createdAt: 'ASC' },
    });
  }

  /** Deletes one secret of the tenant's principal; false when there is none by that id. */
  async delete(tenant: string, principal: string, id: string): Promise<boolean> {
    const result = await this.db.manager.delete(PublisherSecretEntity, { id, tenant, principal });
    return Boolean(result.affected);
  }

  /** The principal's secrets, sealed. */
  sealedOf(tenant: string, principal: string): Promise<Pick<PublisherSecretEntity, 'id' | 'secret'>[]> {
    return this.db.manager.find(PublisherSecretEntity, {
      select: { id: true, secret: true },
      where: { tenant, principal },
    });
  }
}

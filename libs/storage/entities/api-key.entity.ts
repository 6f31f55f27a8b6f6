import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * An API key of a service: who it acts as (tenant, principal), what it may do (scopes), and the SHA-256 of its
 * secret; never the secret itself, which is shown once at creation (libs/security/api-key-credential.ts).
 * Revoking sets `revoked_at` and keeps the row, so the key stays listed and can never authenticate again.
 */
@Entity({ name: 'api_keys' })
@Index('api_keys_tenant_idx', ['tenant', 'createdAt'])
export class ApiKeyEntity {
  /** The key id: the public part of the credential (`emk_<id>_<secret>`). */
  @PrimaryColumn({ type: 'text' })
  id!: string;

  @Column({ type: 'text' })
  tenant!: string;

  @Column({ type: 'text' })
  principal!: string;

  /** A name for people: what the key is for. */
  @Column({ type: 'text' })
  name!: string;

  /** The actions the key grants: `publish`, `subscribe`, `admin`. */
  @Column({ type: 'text', array: true })
  scopes!: string[];

  /** SHA-256 of the 32-byte random secret. */
  @Column({ name: 'secret_hash', type: 'bytea' })
  secretHash!: Buffer;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt!: Date | null;

  /** When the key last authenticated a request, written in batches: at most once a minute, late by up to that. */
  @Column({ name: 'last_used_at', type: 'timestamptz', nullable: true })
  lastUsedAt!: Date | null;
}

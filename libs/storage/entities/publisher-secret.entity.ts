import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A publisher's signing secret (SignatureVerifier, docs/security.md): requests of the principal must carry a
 * Standard Webhooks signature under one of its secrets. At most two per principal, so a secret can rotate; the
 * secret is sealed by the SecretBox (`v1:<keyId>:...`), never stored in the clear.
 */
@Entity({ name: 'publisher_secrets' })
@Index('publisher_secrets_principal_idx', ['tenant', 'principal'])
export class PublisherSecretEntity {
  @PrimaryColumn({ type: 'uuid' })
  id!: string;

  @Column({ type: 'text' })
  tenant!: string;

  @Column({ type: 'text' })
  principal!: string;

  /** The `whsec_...` secret, sealed by the SecretBox. */
  @Column({ type: 'text' })
  secret!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}

import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A `webhook-id` a publisher's signed request used (SignatureVerifier): a second request with the same id is a
 * replay, refused on every instance while the row lives. A row may go once no request with its id can pass the
 * timestamp check any more (`expires_at`: the request's timestamp plus the tolerance); purged in small batches.
 */
@Entity({ name: 'signature_replays' })
@Index('signature_replays_expires_idx', ['expiresAt'])
export class SignatureReplayEntity {
  @PrimaryColumn({ type: 'text' })
  tenant!: string;

  @PrimaryColumn({ type: 'text' })
  principal!: string;

  @PrimaryColumn({ name: 'webhook_id', type: 'text' })
  webhookId!: string;

  @Column({ name: 'seen_at', type: 'timestamptz', default: () => 'now()' })
  seenAt!: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt!: Date;
}

import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { EventPosition } from './event-position';
import { SubscriptionEntity } from './subscription.entity';

/**
 * An event a subscription could not deliver after its last attempt, with why and when. At most one per
 * subscription and log position (dead_letters_position_key): writing one is idempotent (DeadLetterStore.add), and
 * a dead-lettered position is settled for good. Deleted with its subscription, or after the retention period.
 * A replay (dead-letter-replay-store.ts) claims a letter (`replay_id`, `replay_claimed_until`) while it sends it,
 * and marks it `replayed_at` once its subscription's sink acknowledged it; a replayed letter is never sent again.
 */
@Entity({ name: 'dead_letters' })
@Index('dead_letters_subscription_idx', ['subscriptionId', 'createdAt'])
@Index('dead_letters_position_key', ['subscriptionId', 'position.topic', 'position.partition', 'position.offset'], {
  unique: true,
})
@Index('dead_letters_created_idx', ['createdAt'])
@Index('dead_letters_subscription_id_idx', ['subscriptionId', 'id'])
export class DeadLetterEntity {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id!: string;

  @Column({ name: 'subscription_id', type: 'uuid' })
  subscriptionId!: string;

  @Column(() => EventPosition, { prefix: false })
  position!: EventPosition;

  @Column({ name: 'event_id', type: 'text' })
  eventId!: string;

  /** The tenant of its subscription, copied when the letter is written (DeadLetterStore.add). */
  @Column({ type: 'text', default: 'default' })
  tenant!: string;

  /** Context attributes of the event (the frame without its data). */
  @Column({ type: 'jsonb' })
  attributes!: object;

  @Column({ type: 'bytea', nullable: true })
  data!: Buffer | null;

  @Column({ type: 'integer' })
  attempts!: number;

  @Column({ name: 'last_error', type: 'text' })
  lastError!: string;

  @Column({ name: 'first_failed_at', type: 'timestamptz' })
  firstFailedAt!: Date;

  @Column({ name: 'last_failed_at', type: 'timestamptz' })
  lastFailedAt!: Date;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  /** When a replay delivered it (its sink acknowledged it); null while it is a dead letter. */
  @Column({ name: 'replayed_at', type: 'timestamptz', nullable: true })
  replayedAt!: Date | null;

  /** The replay that delivered it (with `replayedAt`), or that holds its claim (until `replayClaimedUntil`). */
  @Column({ name: 'replay_id', type: 'text', nullable: true })
  replayId!: string | null;

  /** A replay's claim on it lasts until then; another replay skips it meanwhile. */
  @Column({ name: 'replay_claimed_until', type: 'timestamptz', nullable: true })
  replayClaimedUntil!: Date | null;

  @ManyToOne(() => SubscriptionEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'subscription_id' })
  subscription?: SubscriptionEntity;
}

import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';
import { EventPositionKey } from './event-position';
import { SubscriptionEntity } from './subscription.entity';

/**
 * A delivery parked for a later attempt. Parking lets the subscription's offset move past the event (the row is
 * durable first), so a sink that keeps failing for one event does not hold back the rest of the partition.
 */
@Entity({ name: 'delivery_retries' })
@Index('delivery_retries_due_idx', ['nextAttemptAt'])
export class DeliveryRetryEntity {
  @PrimaryColumn({ name: 'subscription_id', type: 'uuid' })
  subscriptionId!: string;

  @Column(() => EventPositionKey, { prefix: false })
  position!: EventPositionKey;

  /** The tenant of its subscription, copied when the delivery is parked (RetryStore.park). */
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

  @Column({ name: 'next_attempt_at', type: 'timestamptz' })
  nextAttemptAt!: Date;

  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  epoch!: number;

  @ManyToOne(() => SubscriptionEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'subscription_id' })
  subscription?: SubscriptionEntity;
}

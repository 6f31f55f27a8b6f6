import { Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';
import { LogPartitionKey } from './event-position';
import { SubscriptionEntity } from './subscription.entity';

/**
 * Where a subscription stands in one partition: the next offset it has not yet settled, and the epoch of the
 * owner that wrote it. Written through OffsetStore: `commit`, which never moves it backwards, and an operator's
 * `seek`, which sets it anywhere and raises the generation.
 */
@Entity({ name: 'subscription_offsets' })
export class SubscriptionOffsetEntity {
  @PrimaryColumn({ name: 'subscription_id', type: 'uuid' })
  subscriptionId!: string;

  @Column(() => LogPartitionKey, { prefix: false })
  log!: LogPartitionKey;

  @Column({ name: 'next_offset', type: 'bigint', transformer: bigintAsNumber })
  nextOffset!: number;

  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  epoch!: number;

  /** The subscription's offsets generation this row was written under (`subscriptions.offsets_generation`). */
  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  generation!: number;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;

  @ManyToOne(() => SubscriptionEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'subscription_id' })
  subscription?: SubscriptionEntity;
}

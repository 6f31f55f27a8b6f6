import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';
import { LogPartitionKey } from './event-position';
import { SubscriptionEntity } from './subscription.entity';

/**
 * Events a subscription never got because they were gone from Kafka before it reached them (retention deleted
 * them): offsets `from_offset` up to, not including, `to_offset` of one partition. Written before the
 * subscription's offset moves past them, so no skip is ever silent; a skip recorded again (a retried run starting
 * from the same offset) extends the one row, never counts twice.
 */
@Entity({ name: 'skipped_ranges' })
@Index('skipped_ranges_recorded_idx', ['lastRecordedAt'])
export class SkippedRangeEntity {
  @PrimaryColumn({ name: 'subscription_id', type: 'uuid' })
  subscriptionId!: string;

  @Column(() => LogPartitionKey, { prefix: false })
  log!: LogPartitionKey;

  /** The first offset skipped. */
  @PrimaryColumn({ name: 'from_offset', type: 'bigint', transformer: bigintAsNumber })
  fromOffset!: number;

  /** Where delivery resumed: the first offset still in the log (not skipped). */
  @Column({ name: 'to_offset', type: 'bigint', transformer: bigintAsNumber })
  toOffset!: number;

  /** Why the events were skipped: `RETENTION` (Kafka deleted them). */
  @Column({ type: 'text' })
  reason!: string;

  /** The epoch of the loop that recorded (or last extended) the range. */
  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  epoch!: number;

  @Column({ name: 'first_recorded_at', type: 'timestamptz', default: () => 'now()' })
  firstRecordedAt!: Date;

  @Column({ name: 'last_recorded_at', type: 'timestamptz', default: () => 'now()' })
  lastRecordedAt!: Date;

  @ManyToOne(() => SubscriptionEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'subscription_id' })
  subscription?: SubscriptionEntity;
}

import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/**
 * The dispatch run of one instance in LOCAL_STICKY_PULL, and its epoch (the fencing token). Each start of the
 * instance's poll-and-dispatch activity claims the next epoch; every write of its loop is conditional on the row
 * still holding it, so an older run that still works (a retried attempt, an old process) can no longer write.
 * Moving a subscription off an instance also takes the next epoch, fencing the run that delivered it.
 */
@Entity({ name: 'dispatch_runs' })
export class DispatchRunEntity {
  @PrimaryColumn({ name: 'instance_id', type: 'text' })
  instanceId!: string;

  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  epoch!: number;

  /** Who claimed the current epoch (the worker identity and activity attempt), for operators. */
  @Column({ type: 'text', nullable: true })
  owner!: string | null;

  @Column({ name: 'claimed_at', type: 'timestamptz', nullable: true })
  claimedAt!: Date | null;

  /** When the run under the current epoch last showed it is alive (a write conditional on its epoch). */
  @Column({ name: 'renewed_at', type: 'timestamptz', nullable: true })
  renewedAt!: Date | null;

  /** Writes refused because they carried an older epoch than this row's (stale runs fenced off). */
  @Column({ name: 'rejected_writes', type: 'bigint', default: 0, transformer: bigintAsNumber })
  rejectedWrites!: number;
}

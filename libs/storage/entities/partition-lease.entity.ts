import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/** Who owns `topic#partition` in PARTITION_OWNED_PULL, and under which epoch (the fencing token). */
@Entity({ name: 'partition_leases' })
export class PartitionLeaseEntity {
  @PrimaryColumn({ type: 'text' })
  topic!: string;

  @PrimaryColumn({ type: 'integer' })
  partition!: number;

  @Column({ type: 'text', nullable: true })
  owner!: string | null;

  @Column({ type: 'bigint', default: 0, transformer: bigintAsNumber })
  epoch!: number;

  /** When the owner last renewed the lease (a write conditional on its epoch). */
  @Column({ name: 'renewed_at', type: 'timestamptz', nullable: true })
  renewedAt!: Date | null;

  /** Writes refused because they carried an older epoch than this row's (stale owners fenced off). */
  @Column({ name: 'rejected_writes', type: 'bigint', default: 0, transformer: bigintAsNumber })
  rejectedWrites!: number;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}

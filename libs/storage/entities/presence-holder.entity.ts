import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/**
 * The epoch of each presence holder id (`<instance id>/<pid>`), the fencing token of its presence rows. A process
 * claims the next epoch when it first writes presence under the id; a holder id is taken over when another process
 * comes to bear it (a restarted container whose process is pid 1 again, beside an old one not gone yet). Every
 * renewal and removal of the id's rows is conditional on the epoch it claimed still being this row's, so the older
 * process's renewals are refused and never overwrite the newer one's rows.
 */
@Entity({ name: 'presence_holders' })
export class PresenceHolderEntity {
  @PrimaryColumn({ type: 'text' })
  holder!: string;

  @Column({ type: 'bigint', transformer: bigintAsNumber })
  epoch!: number;

  @Column({ name: 'claimed_at', type: 'timestamptz', default: () => 'now()' })
  claimedAt!: Date;
}

import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * What one instance saw of one tenant in its last quota sync (libs/security/tenant-quota-filter.ts): the publish
 * demand (events and bytes per second it was asked to admit) and the stream connections it holds. Each instance
 * rewrites its rows every sync; a row not rewritten for a few syncs is of a dead or idle instance and is ignored,
 * then deleted.
 */
@Entity({ name: 'quota_usage' })
@Index('quota_usage_updated_idx', ['updatedAt'])
export class QuotaUsageEntity {
  @PrimaryColumn({ type: 'text' })
  tenant!: string;

  @PrimaryColumn({ name: 'instance_id', type: 'text' })
  instanceId!: string;

  @Column({ name: 'events_demand', type: 'double precision', default: 0 })
  eventsDemand!: number;

  @Column({ name: 'bytes_demand', type: 'double precision', default: 0 })
  bytesDemand!: number;

  @Column({ type: 'integer', default: 0 })
  streams!: number;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}

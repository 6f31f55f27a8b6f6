import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './bigint.transformer';

/** A tenant's own quota: each limit set here replaces the configured default (EVENTMESH_SECURITY_GATE_QUOTA_*); null keeps it. */
@Entity({ name: 'tenant_quotas' })
export class TenantQuotaEntity {
  @PrimaryColumn({ type: 'text' })
  tenant!: string;

  @Column({ name: 'events_per_second', type: 'integer', nullable: true })
  eventsPerSecond!: number | null;

  @Column({ name: 'bytes_per_second', type: 'bigint', nullable: true, transformer: bigintAsNumber })
  bytesPerSecond!: number | null;

  @Column({ name: 'burst_seconds', type: 'integer', nullable: true })
  burstSeconds!: number | null;

  @Column({ name: 'stream_connections', type: 'integer', nullable: true })
  streamConnections!: number | null;

  @Column({ type: 'integer', nullable: true })
  subscriptions!: number | null;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}

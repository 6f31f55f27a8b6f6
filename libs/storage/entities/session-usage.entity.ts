import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * What one gateway process holds of one tenant's streaming-session quotas (libs/sessions/session-usage.ts): its
 * open sessions, agent replicas and bytes in flight (the windows of its sessions). Each process rewrites its rows
 * at once on a change and about every second; the others sum them to hold the tenant's caps across the cluster. A
 * row not rewritten for a few seconds is of a dead process and counts for nothing, then is deleted.
 */
@Entity({ name: 'session_usage' })
@Index('session_usage_renewed_idx', ['renewedAt'])
export class SessionUsageEntity {
  @PrimaryColumn({ type: 'text' })
  tenant!: string;

  /** The holding process: `<instance id>/<pid>`. */
  @PrimaryColumn({ type: 'text' })
  holder!: string;

  @Column({ name: 'instance_id', type: 'text' })
  instanceId!: string;

  @Column({ type: 'integer' })
  sessions!: number;

  @Column({ type: 'integer' })
  agents!: number;

  @Column({ type: 'bigint' })
  bytes!: string;

  @Column({ name: 'renewed_at', type: 'timestamptz', default: () => 'now()' })
  renewedAt!: Date;
}

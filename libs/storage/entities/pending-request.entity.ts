import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A request-reply exchange waiting for its reply: which instance holds the HTTP request, until when, and the
 * reply once one arrived (through any instance). The holder hears of it by Postgres NOTIFY.
 */
@Entity({ name: 'pending_requests' })
@Index('pending_requests_deadline_idx', ['deadline'])
export class PendingRequestEntity {
  @PrimaryColumn({ name: 'correlation_id', type: 'text' })
  correlationId!: string;

  /** The requesting caller's tenant: only a reply of the same tenant completes the request. */
  @Column({ type: 'text', default: 'default' })
  tenant!: string;

  @Column({ name: 'instance_id', type: 'text' })
  instanceId!: string;

  @Column({ type: 'timestamptz' })
  deadline!: Date;

  /**
   * The holding process's liveness key: that process holds the session advisory lock (REPLY_HOLDER_LOCK_SPACE,
   * holder_key) on its reply connection while it lives. Null on rows written before the key existed.
   */
  @Column({ name: 'holder_key', type: 'integer', nullable: true })
  holderKey!: number | null;

  /** The reply's context attributes, once it arrived. */
  @Column({ name: 'reply_attributes', type: 'jsonb', nullable: true })
  replyAttributes!: object | null;

  @Column({ name: 'reply_data', type: 'bytea', nullable: true })
  replyData!: Buffer | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}

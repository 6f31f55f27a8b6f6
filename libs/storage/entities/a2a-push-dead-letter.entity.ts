import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn, Unique } from 'typeorm';
import { A2ATaskEntity } from './a2a-task.entity';

/**
 * A push of an A2A task given up after the webhook deliveries' last attempt (docs/a2a.md, "Push dead letters"): which
 * task version the config's receiver did not acknowledge, how the attempts failed, and what became of it. The
 * payload is not kept: a push carries the whole task, so a redelivery sends the task as it is then (never older).
 * One letter per task version and config (a push tried again by Temporal records it once).
 */
@Entity({ name: 'a2a_push_dead_letters' })
@Unique('a2a_push_dead_letters_version_key', ['taskId', 'configId', 'taskVersion'])
@Index('a2a_push_dead_letters_tenant_idx', ['tenant', 'deadLetteredAt'])
// The retention's purge: the oldest letters first, whatever their tenant.
@Index('a2a_push_dead_letters_age_idx', ['deadLetteredAt'])
export class A2APushDeadLetterEntity {
  /** Chosen by the mesh when the push is given up. */
  @PrimaryColumn({ type: 'uuid' })
  id!: string;

  /** The task's tenant: only that tenant's callers see or act on the letter. */
  @Column({ type: 'text' })
  tenant!: string;

  @Column({ name: 'task_id', type: 'text' })
  taskId!: string;

  /** The task's agent (a filter of the browse). */
  @Column({ type: 'text' })
  agent!: string;

  /** The push config's id within its task; the config itself may be removed since. */
  @Column({ name: 'config_id', type: 'text' })
  configId!: string;

  /** The receiver's URL when the push was given up. */
  @Column({ type: 'text' })
  url!: string;

  /** The task version the push carried, and the task's state in it. */
  @Column({ name: 'task_version', type: 'integer' })
  taskVersion!: number;

  @Column({ name: 'task_state', type: 'text' })
  taskState!: string;

  /** Attempts made: the delivery's, then each redelivery's. */
  @Column({ type: 'integer' })
  attempts!: number;

  @Column({ name: 'last_error', type: 'text' })
  lastError!: string;

  /** The receiver's last HTTP status; null when it gave none (no connection, a timeout). */
  @Column({ name: 'last_http_status', type: 'integer', nullable: true })
  lastHttpStatus!: number | null;

  @Column({ name: 'dead_lettered_at', type: 'timestamptz', default: () => 'now()' })
  deadLetteredAt!: Date;

  /**
   * How the letter was resolved: `redelivered` (an operator's redelivery was acknowledged), `superseded` (the receiver
   * acknowledged a later version of the task: it has the whole task since), `config-removed` (the client removed the
   * config); null while it is dead.
   */
  @Column({ type: 'text', nullable: true })
  resolution!: string | null;

  @Column({ name: 'resolved_at', type: 'timestamptz', nullable: true })
  resolvedAt!: Date | null;

  /** The task version the resolution delivered. */
  @Column({ name: 'resolved_version', type: 'integer', nullable: true })
  resolvedVersion!: number | null;

  @ManyToOne(() => A2ATaskEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'task_id' })
  task?: A2ATaskEntity;
}

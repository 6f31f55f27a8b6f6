import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { A2ATaskEntity } from './a2a-task.entity';

/**
 * A push notification config of an A2A task (docs/a2a.md): where the task's updates are POSTed, with the token or
 * the authentication the client gave. `pushed_version` is the task version last delivered to it: a push moves it on
 * only forwards (compare-and-set), so updates arrive in order and none is sent again after it was acknowledged.
 */
@Entity({ name: 'a2a_push_configs' })
@Index('a2a_push_configs_tenant_task_idx', ['tenant', 'taskId'])
export class A2APushConfigEntity {
  @PrimaryColumn({ name: 'task_id', type: 'text' })
  taskId!: string;

  /** The config's id, unique within its task (the client's, or a UUID the mesh chose). */
  @PrimaryColumn({ type: 'text' })
  id!: string;

  /** The task's tenant: only that tenant's callers read or change the task's configs. */
  @Column({ type: 'text' })
  tenant!: string;

  @Column({ type: 'text' })
  url!: string;

  /** The client's token, sent back in `X-A2A-Notification-Token` (when no authentication is given). */
  @Column({ type: 'text', nullable: true })
  token!: string | null;

  /** A2A `AuthenticationInfo` `{ scheme, credentials }`: sent as `Authorization: <scheme> <credentials>`. */
  @Column({ type: 'jsonb', nullable: true })
  authentication!: { scheme: string; credentials: string } | null;

  /** The protocol version it was set over (`1.0` or `0.3`): the shape of the payloads it is sent. */
  @Column({ name: 'wire_version', type: 'text' })
  wireVersion!: string;

  @Column({ name: 'pushed_version', type: 'integer', default: 0 })
  pushedVersion!: number;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @ManyToOne(() => A2ATaskEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'task_id' })
  task?: A2ATaskEntity;
}

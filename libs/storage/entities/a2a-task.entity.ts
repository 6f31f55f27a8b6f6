import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/** An A2A task. `version` is the compare-and-set guard for state transitions. */
@Entity({ name: 'a2a_tasks' })
@Index('a2a_tasks_context_idx', ['contextId'])
@Index('a2a_tasks_tenant_context_idx', ['tenant', 'contextId'])
export class A2ATaskEntity {
  @PrimaryColumn({ type: 'text' })
  id!: string;

  /** The tenant that owns the task: only that tenant's callers see or change it. */
  @Column({ type: 'text', default: 'default' })
  tenant!: string;

  @Column({ name: 'context_id', type: 'text' })
  contextId!: string;

  @Column({ type: 'text' })
  state!: string;

  @Column({ type: 'jsonb', default: () => "'[]'" })
  history!: unknown[];

  @Column({ type: 'jsonb', default: () => "'[]'" })
  artifacts!: unknown[];

  @Column({ type: 'jsonb', default: () => "'{}'" })
  metadata!: Record<string, unknown>;

  @Column({ type: 'integer', default: 0 })
  version!: number;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}

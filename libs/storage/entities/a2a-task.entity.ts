import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import type { EventPosition } from './event-position';

/** An A2A task. `version` is the compare-and-set guard for state transitions. */
@Entity({ name: 'a2a_tasks' })
@Index('a2a_tasks_context_idx', ['contextId'])
@Index('a2a_tasks_tenant_context_idx', ['tenant', 'contextId'])
@Index('a2a_tasks_tenant_agent_created_idx', ['tenant', 'agent', 'createdAt', 'id'])
// The tasks whose events are not all on their agent's events topic yet (the publisher's sweep, libs/a2a).
@Index('a2a_tasks_unpublished_idx', ['updatedAt'], { where: '"event_seq" > "published_seq"' })
// The retention's purge: the settled tasks (ended, or waiting for their client), oldest change first.
@Index('a2a_tasks_settled_idx', ['updatedAt'], {
  where: `"state" IN ('completed', 'failed', 'canceled', 'rejected', 'input-required', 'auth-required')`,
})
export class A2ATaskEntity {
  @PrimaryColumn({ type: 'text' })
  id!: string;

  /** The tenant that owns the task: only that tenant's callers see or change it. */
  @Column({ type: 'text', default: 'default' })
  tenant!: string;

  /** The registered agent (libs/a2a) the task was sent to, by name within the tenant. */
  @Column({ type: 'text', default: '' })
  agent!: string;

  /** The task's id at the agent, once the agent answered (the mesh's own id is `id`). */
  @Column({ name: 'agent_task_id', type: 'text', nullable: true })
  agentTaskId!: string | null;

  /**
   * The last turn of the client's (its first message is turn 1, each message continuing the task one more) that
   * was sent to an agent at a URL: a delivery tried again sends a turn at most once, then follows the agent's task.
   */
  @Column({ name: 'delivered_turn', type: 'integer', default: 0 })
  deliveredTurn!: number;

  /** How often the first turn was sent again after the agent lost the task (libs/a2a/relay/agent-task-follower.ts; at most once). */
  @Column({ name: 'agent_resends', type: 'integer', default: 0 })
  agentResends!: number;

  /**
   * Where the task's first request is in its agent's request topic (topic, partition, offset): a delivery of the
   * first turn reads it from there. Null for tasks taken before it was recorded (their workflow's input names it).
   */
  @Column({ name: 'request_record', type: 'jsonb', nullable: true })
  requestRecord!: EventPosition | null;

  @Column({ name: 'context_id', type: 'text' })
  contextId!: string;

  @Column({ type: 'text' })
  state!: string;

  /** The status message of the current state (A2A `TaskStatus.message`), if any. */
  @Column({ name: 'status_message', type: 'jsonb', nullable: true })
  statusMessage!: Record<string, unknown> | null;

  @Column({ type: 'jsonb', default: () => "'[]'" })
  history!: unknown[];

  @Column({ type: 'jsonb', default: () => "'[]'" })
  artifacts!: unknown[];

  @Column({ type: 'jsonb', default: () => "'{}'" })
  metadata!: Record<string, unknown>;

  @Column({ type: 'integer', default: 0 })
  version!: number;

  /** The `seq` of the task's last event in `a2a_task_events` (0: none yet), moved on by the change that appends. */
  @Column({ name: 'event_seq', type: 'integer', default: 0 })
  eventSeq!: number;

  /** The `seq` of the task's last event written to its agent's events topic (libs/a2a/tasks/task-event-publisher.ts). */
  @Column({ name: 'published_seq', type: 'integer', default: 0 })
  publishedSeq!: number;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}

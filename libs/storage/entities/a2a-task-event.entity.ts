import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * One event of an A2A task's ordered log (libs/a2a/tasks/task-events.ts): what the mesh recorded for the task, appended in
 * the transaction of the change itself. `seq` counts from 1 per task (`a2a_tasks.event_seq` is the last one); it is
 * the `id:` of the event on an SSE stream, and what a client resumes after with `Last-Event-ID`.
 */
@Entity({ name: 'a2a_task_events' })
export class A2ATaskEventEntity {
  @PrimaryColumn({ name: 'task_id', type: 'text' })
  taskId!: string;

  @PrimaryColumn({ type: 'integer' })
  seq!: number;

  /** `task` (a snapshot of the whole task), `status-update` or `artifact-update`. */
  @Column({ type: 'text' })
  kind!: string;

  /** The event as A2A v1.0 JSON: a `Task`, a `TaskStatusUpdateEvent` or a `TaskArtifactUpdateEvent`. */
  @Column({ type: 'jsonb' })
  payload!: Record<string, unknown>;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}

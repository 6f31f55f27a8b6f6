import type { DataSource, EntityManager } from 'typeorm';

/** An event of a task's log not on its agent's events topic yet, with what its frame needs. */
export interface UnpublishedTaskEvent<Kind extends string = string> {
  tenant: string;
  agent: string;
  seq: number;
  kind: Kind;
  payload: Record<string, unknown>;
  created_at: Date;
}

/** The seed of the advisory lock keys of task publishes (`hashtextextended(taskId, seed)`), apart from other locks. */
const LOCK_NAMESPACE = 7221;

/**
 * The SQL of the copy of the tasks' event logs to Kafka (libs/a2a/tasks/task-event-publisher.ts):
 * `a2a_tasks.published_seq` is the last seq written to Kafka, moved on forwards only, under the task's advisory lock.
 */
export class TaskPublicationRows<Kind extends string = string> {
  constructor(private readonly db: DataSource) {}

  /** Runs `run` in a transaction holding the task's advisory lock: one publisher per task at a time, everywhere. */
  underTaskLock<T>(taskId: string, run: (tx: EntityManager) => Promise<T>): Promise<T> {
    return this.db.transaction(async (manager) => {
      await manager.query('SELECT pg_advisory_xact_lock(hashtextextended($1, $2))', [taskId, LOCK_NAMESPACE]);
      return run(manager);
    });
  }

  /** The task's events after its `published_seq`, in seq order, at most `limit`. */
  unpublished(tx: EntityManager, taskId: string, limit: number): Promise<UnpublishedTaskEvent<Kind>[]> {
    return tx.query(
      `SELECT t.tenant, t.agent, e.seq, e.kind, e.payload, e.created_at FROM a2a_tasks t
           JOIN a2a_task_events e ON e.task_id = t.id AND e.seq > t.published_seq
          WHERE t.id = $1 ORDER BY e.seq LIMIT ${limit}`,
      [taskId],
    );
  }

  /** Moves the task's `published_seq` on to `last` (never back). */
  async published(tx: EntityManager, taskId: string, last: number): Promise<void> {
    await tx.query('UPDATE a2a_tasks SET published_seq = GREATEST(published_seq, $2) WHERE id = $1', [taskId, last]);
  }

  /** The tasks whose events are not all published and whose last change is older than `afterMs`, oldest first. */
  leftBehind(afterMs: number, limit: number): Promise<{ id: string; tenant: string; agent: string }[]> {
    return this.db.query(
      `SELECT id, tenant, agent FROM a2a_tasks WHERE event_seq > published_seq AND updated_at < now() - make_interval(secs => $1::float8 / 1000)
        ORDER BY updated_at LIMIT ${limit}`,
      [afterMs],
    );
  }

  /** Marks every event of the tasks published (nobody observed them). */
  async allPublished(ids: string[]): Promise<void> {
    await this.db.query('UPDATE a2a_tasks SET published_seq = event_seq WHERE id = ANY($1::text[])', [ids]);
  }
}

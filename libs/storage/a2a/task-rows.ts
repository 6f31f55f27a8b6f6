import type { DataSource, EntityManager } from 'typeorm';
import type { TaskRequestRecord } from '../../../contracts';

/**
 * A task as the mesh stores it (`a2a_tasks`); `State` is its state as libs/a2a/tasks/task-states.ts names them.
 * Messages, parts and artifacts are A2A v1.0 JSON.
 */
export interface StoredTaskRow<State extends string = string> {
  id: string;
  tenant: string;
  agent: string;
  agentTaskId: string | null;
  /** The last of the client's turns sent to an agent at a URL (0: none yet; a message continuing the task is the next). */
  deliveredTurn: number;
  /** How often the first turn was sent again after the agent lost the task (at most once: agent-task-follower.ts). */
  agentResends: number;
  /** Where the task's first request is in Kafka (null: taken before this was recorded; its workflow's input names it). */
  requestRecord: TaskRequestRecord | null;
  contextId: string;
  state: State;
  statusMessage: Record<string, unknown> | null;
  history: Record<string, unknown>[];
  artifacts: Record<string, unknown>[];
  metadata: Record<string, unknown>;
  /** The compare-and-set guard: every change names the version it read, and moves it on by one. */
  version: number;
  /** The seq of the task's last event in its log (libs/a2a/tasks/task-events.ts): the task as read is the log up to it. */
  eventSeq: number;
  createdAt: Date;
  updatedAt: Date;
}

/** What a transition changes besides the state; absent fields keep their value. */
export interface TaskRowChange<State extends string = string> {
  state: State;
  statusMessage?: Record<string, unknown> | null;
  history?: Record<string, unknown>[];
  artifacts?: Record<string, unknown>[];
  /** The agent's task id; null clears it (the agent lost its task). */
  agentTaskId?: string | null;
  contextId?: string;
  /** The turn this change recorded as sent to the agent. */
  deliveredTurn?: number;
  agentResends?: number;
}

interface RawTask<State extends string> {
  id: string;
  tenant: string;
  agent: string;
  agent_task_id: string | null;
  delivered_turn: number;
  agent_resends: number;
  request_record: TaskRequestRecord | null;
  context_id: string;
  state: State;
  status_message: Record<string, unknown> | null;
  history: Record<string, unknown>[];
  artifacts: Record<string, unknown>[];
  metadata: Record<string, unknown>;
  version: number;
  event_seq: number;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS =
  'id, tenant, agent, agent_task_id, delivered_turn, agent_resends, request_record, context_id, state, status_message, history, artifacts, metadata, version, event_seq, created_at, updated_at';

/**
 * The insert of a change's events (libs/a2a/tasks/task-events.ts), as a data-modifying CTE beside the statement that
 * writes the task (`written`, another CTE of it): it inserts only if that statement wrote the row. `events` names the parameter
 * holding the events as a JSON array. The seqs were reserved by the write itself (`a2a_tasks.event_seq`, under the
 * task's row lock), so two changes never write the same seq; the primary key (task_id, seq) refuses one that would.
 */
const INSERT_EVENTS = (events: string, written: string) =>
  `INSERT INTO a2a_task_events (task_id, seq, kind, payload)
   SELECT e."taskId", e.seq, e.kind, e.payload FROM jsonb_to_recordset(${events}::jsonb) AS e("taskId" text, seq int, kind text, payload jsonb)
   WHERE EXISTS (SELECT 1 FROM ${written})`;

const taskOf = <State extends string>(r: RawTask<State>): StoredTaskRow<State> => ({
  id: r.id,
  tenant: r.tenant,
  agent: r.agent,
  agentTaskId: r.agent_task_id,
  deliveredTurn: r.delivered_turn,
  agentResends: r.agent_resends,
  requestRecord: r.request_record,
  contextId: r.context_id,
  state: r.state,
  statusMessage: r.status_message,
  history: r.history,
  artifacts: r.artifacts,
  metadata: r.metadata,
  version: r.version,
  eventSeq: r.event_seq,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export interface NewTaskRow {
  id: string;
  tenant: string;
  agent: string;
  contextId: string;
  history: Record<string, unknown>[];
  metadata: Record<string, unknown>;
  /** Where its request was written in the agent's request topic. */
  requestRecord?: TaskRequestRecord;
}

/** One event of a task's log (`a2a_task_events`); libs/a2a/tasks/task-events.ts types its kinds and payloads. */
export interface TaskEventRow<Kind extends string = string, Payload = unknown> {
  taskId: string;
  seq: number;
  kind: Kind;
  payload: Payload;
}

/**
 * The `a2a_tasks` table and its event log (`a2a_task_events`): the SQL of libs/a2a/tasks/task-store.ts, which decides
 * what a change is (legal transitions, its events). Every read and write names the tenant. A change is a
 * compare-and-set on `version`, written with its events in one statement: recorded with them or not at all.
 */
export class A2ATaskRows<State extends string = string> {
  constructor(private readonly db: DataSource) {}

  /** Inserts a task, `submitted`, version 0, at `at`, with its log's first `events` (one statement). */
  async insert(task: NewTaskRow, at: Date, events: readonly TaskEventRow[]): Promise<StoredTaskRow<State>> {
    const [row]: RawTask<State>[] = await this.db.query(
      `WITH created AS (
         INSERT INTO a2a_tasks (id, tenant, agent, context_id, state, history, metadata, event_seq, created_at, updated_at, request_record)
         VALUES ($1, $2, $3, $4, 'submitted', $5, $6, 1, $7, $7, $9) RETURNING ${COLUMNS}
       ), logged AS (${INSERT_EVENTS('$8', 'created')})
       SELECT * FROM created`,
      [
        task.id,
        task.tenant,
        task.agent,
        task.contextId,
        JSON.stringify(task.history),
        JSON.stringify(task.metadata),
        at,
        JSON.stringify(events),
        task.requestRecord ? JSON.stringify(task.requestRecord) : null,
      ],
    );
    return taskOf(row);
  }

  /**
   * Deletes at most `limit` settled tasks (in a state of `settled`) whose last change was before `cutoff`, oldest first: tasks that ended (a
   * terminal state), and tasks left waiting for their client (input-required, auth-required: the client never sent
   * the input or credentials the agent asked for, and no workflow runs for them). Each goes with its event log (its push configs and push dead letters cascade); a task whose events are not all on its
   * agent's events topic yet is kept until they are. Rows another purge holds are skipped. Answers how many tasks
   * (the retention, libs/storage/retention-purge.ts).
   */
  async purgeOlderThan(cutoff: Date, limit: number, settled: Iterable<string>): Promise<number> {
    const rows: unknown[] = await this.db.query(
      `WITH doomed AS (
         SELECT id FROM a2a_tasks
          WHERE state IN (${[...settled].map((s) => `'${s}'`).join(', ')}) AND updated_at < $1 AND event_seq <= published_seq
          ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED
       ), events AS (
         DELETE FROM a2a_task_events WHERE task_id IN (SELECT id FROM doomed)
       )
       DELETE FROM a2a_tasks WHERE id IN (SELECT id FROM doomed) RETURNING 1`,
      [cutoff, limit],
    );
    // TypeORM answers a DELETE ... RETURNING on Postgres with [rows, affected].
    return Number(rows[1] ?? 0);
  }

  async get(tenant: string, id: string): Promise<StoredTaskRow<State> | undefined> {
    const rows: RawTask<State>[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_tasks WHERE id = $1 AND tenant = $2`,
      [id, tenant],
    );
    return rows.length === 0 ? undefined : taskOf(rows[0]);
  }

  /**
   * Applies `change` to the task if it is still at `read.version` (compare-and-set), at `at`, appending `events`
   * (numbered after `read.eventSeq`) in the same statement: their seqs are reserved by the UPDATE itself
   * (`event_seq`), under the row lock that serialises the task's changes. Undefined when nothing was written.
   */
  async update(
    read: Pick<StoredTaskRow, 'id' | 'tenant' | 'version'>,
    change: TaskRowChange<State>,
    at: Date,
    events: readonly TaskEventRow[],
  ): Promise<StoredTaskRow<State> | undefined> {
    const rows: RawTask<State>[] = await this.db.query(
      `WITH updated AS (
         UPDATE a2a_tasks SET state = $4,
           status_message = CASE WHEN $5::boolean THEN $6::jsonb ELSE status_message END,
           history = COALESCE($7::jsonb, history), artifacts = COALESCE($8::jsonb, artifacts),
           agent_task_id = CASE WHEN $15::boolean THEN NULL ELSE COALESCE($9, agent_task_id) END, context_id = COALESCE($10, context_id),
           delivered_turn = COALESCE($12, delivered_turn), agent_resends = COALESCE($16, agent_resends),
           version = version + 1, event_seq = event_seq + $11, updated_at = $13
         WHERE id = $1 AND tenant = $2 AND version = $3
         RETURNING ${COLUMNS}
       ), logged AS (${INSERT_EVENTS('$14', 'updated')})
       SELECT * FROM updated`,
      [
        read.id,
        read.tenant,
        read.version,
        change.state,
        change.statusMessage !== undefined,
        change.statusMessage == null ? null : JSON.stringify(change.statusMessage),
        change.history === undefined ? null : JSON.stringify(change.history),
        change.artifacts === undefined ? null : JSON.stringify(change.artifacts),
        change.agentTaskId ?? null,
        change.contextId ?? null,
        events.length,
        change.deliveredTurn ?? null,
        at,
        JSON.stringify(events),
        change.agentTaskId === null,
        change.agentResends ?? null,
      ],
    );
    return rows.length === 1 ? taskOf(rows[0]) : undefined;
  }

  /**
   * One page of the tenant's tasks of an agent, newest first (by creation, then id), filtered by context, state and
   * last change. `after` is the id of the last task of the previous page; `more` says whether another page follows.
   */
  async list(
    tenant: string,
    agent: string,
    page: { size: number; after?: string; contextId?: string; state?: State; changedAfter?: Date },
  ): Promise<{ tasks: StoredTaskRow<State>[]; total: number; more: boolean }> {
    const where = ['tenant = $1', 'agent = $2'];
    const params: unknown[] = [tenant, agent];
    if (page.contextId) {
      params.push(page.contextId);
      where.push(`context_id = $${params.length}`);
    }
    if (page.state) {
      params.push(page.state);
      where.push(`state = $${params.length}`);
    }
    if (page.changedAfter) {
      params.push(page.changedAfter);
      where.push(`updated_at > $${params.length}`);
    }
    const filtered = where.join(' AND ');
    const [{ total }]: { total: number }[] = await this.db.query(
      `SELECT count(*)::int AS total FROM a2a_tasks WHERE ${filtered}`,
      params,
    );
    const pageParams = [...params];
    let cursor = '';
    if (page.after !== undefined) {
      pageParams.push(page.after);
      const at = `$${pageParams.length}`;
      cursor = ` AND (created_at, id) < (SELECT created_at, id FROM a2a_tasks WHERE id = ${at} AND tenant = $1)`;
    }
    pageParams.push(page.size + 1);
    const rows: RawTask<State>[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_tasks WHERE ${filtered}${cursor} ORDER BY created_at DESC, id DESC LIMIT $${pageParams.length}`,
      pageParams,
    );
    return { tasks: rows.slice(0, page.size).map((r) => taskOf(r)), total, more: rows.length > page.size };
  }

  /** The seq of each task's last event (`event_seq`), of the tasks of `ids` that exist. */
  async eventSeqs(ids: string[]): Promise<{ id: string; event_seq: number }[]> {
    return this.db.query('SELECT id, event_seq FROM a2a_tasks WHERE id = ANY($1)', [ids]);
  }
}

/** Reads a task's log: the events after `afterSeq`, oldest first, at most `limit` (in `db`'s transaction, if any). */
export async function readTaskEvents<Kind extends string, Payload>(
  db: Pick<EntityManager, 'query'>,
  taskId: string,
  afterSeq: number,
  limit: number,
): Promise<TaskEventRow<Kind, Payload>[]> {
  const rows: { task_id: string; seq: number; kind: Kind; payload: Payload }[] = await db.query(
    'SELECT task_id, seq, kind, payload FROM a2a_task_events WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
    [taskId, afterSeq, limit],
  );
  return rows.map((r) => ({ taskId: r.task_id, seq: r.seq, kind: r.kind, payload: r.payload }));
}

import type { DataSource } from 'typeorm';
import type { TaskRequestRecord } from '../../../contracts';
import { DEAD_LETTER_PURGE_BATCH } from '@libs/storage';
import { createdEventOf, draftsOf, eventsOf, TaskVersion } from './task-events';
import { A2AState, isLegalTransition, SETTLED } from './task-states';

/** A task as the mesh stores it (`a2a_tasks`). Messages, parts and artifacts are A2A v1.0 JSON. */
export interface StoredTask {
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
  state: A2AState;
  statusMessage: Record<string, unknown> | null;
  history: Record<string, unknown>[];
  artifacts: Record<string, unknown>[];
  metadata: Record<string, unknown>;
  /** The compare-and-set guard: every change names the version it read, and moves it on by one. */
  version: number;
  /** The seq of the task's last event in its log (task-events.ts): the task as read is the log up to it. */
  eventSeq: number;
  createdAt: Date;
  updatedAt: Date;
}

/** What a transition changes besides the state; absent fields keep their value. */
export interface TaskChange {
  state: A2AState;
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

/** A transition's outcome: the task as changed, or why nothing changed and the task as it is now. */
export type TransitionResult =
  | { changed: true; task: StoredTask }
  /** `illegal`: the state read may not move to the one asked (terminal, or back to submitted). */
  | { changed: false; reason: 'illegal'; task: StoredTask }
  /** `stale`: another change moved the version on since it was read; `task` is the winner's. */
  | { changed: false; reason: 'stale'; task: StoredTask }
  | { changed: false; reason: 'missing' };

interface RawTask {
  id: string;
  tenant: string;
  agent: string;
  agent_task_id: string | null;
  delivered_turn: number;
  agent_resends: number;
  request_record: TaskRequestRecord | null;
  context_id: string;
  state: A2AState;
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
 * The insert of a change's events (task-events.ts), as a data-modifying CTE beside the statement that writes the task
 * (`written`, another CTE of it): it inserts only if that statement wrote the row. `events` names the parameter
 * holding the events as a JSON array. The seqs were reserved by the write itself (`a2a_tasks.event_seq`, under the
 * task's row lock), so two changes never write the same seq; the primary key (task_id, seq) refuses one that would.
 */
const INSERT_EVENTS = (events: string, written: string) =>
  `INSERT INTO a2a_task_events (task_id, seq, kind, payload)
   SELECT e."taskId", e.seq, e.kind, e.payload FROM jsonb_to_recordset(${events}::jsonb) AS e("taskId" text, seq int, kind text, payload jsonb)
   WHERE EXISTS (SELECT 1 FROM ${written})`;

const taskOf = (r: RawTask): StoredTask => ({
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

export interface NewTask {
  id: string;
  tenant: string;
  agent: string;
  contextId: string;
  history: Record<string, unknown>[];
  metadata: Record<string, unknown>;
  /** Where its request was written in the agent's request topic. */
  requestRecord?: TaskRequestRecord;
}

/**
 * The `a2a_tasks` table. Every read and write names the tenant (another tenant's task is not there). State changes
 * are compare-and-set on `version`: a change is applied only if the task is still at the version the caller read,
 * and only if that version's state may move to the new one; a cancel racing a completion thus leaves exactly one
 * outcome, whichever committed first, on every instance. Every write appends what it changed to the task's event
 * log (task-events.ts) in its own transaction: a change is recorded with its events or not at all, and the log is the
 * task's history in the order the changes committed (what SSE streams read, from any instance).
 */
export class A2ATaskStore {
  constructor(
    private readonly db: DataSource,
    /** Told of each task whose change (and its events) committed: the events topic's publisher (task-event-publisher.ts). */
    private readonly committed?: (task: StoredTask) => void,
  ) {}

  /** A new task, `submitted`, version 0; its log begins with it (event 1, a `task` snapshot). */
  async create(task: NewTask): Promise<StoredTask> {
    const at = new Date();
    // The row and its first event in one statement (one round trip, atomic as any statement is): the event is the
    // task as created, which is known before the insert, timestamps included (they are given, not defaulted).
    const event = createdEventOf({ ...task, state: 'submitted', statusMessage: null, artifacts: [], updatedAt: at });
    const [row]: RawTask[] = await this.db.query(
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
        JSON.stringify([event]),
        task.requestRecord ? JSON.stringify(task.requestRecord) : null,
      ],
    );
    const created = taskOf(row);
    this.committed?.(created);
    return created;
  }

  /**
   * Deletes at most `limit` settled tasks whose last change was before `cutoff`, oldest first: tasks that ended (a
   * terminal state), and tasks left waiting for their client (input-required, auth-required: the client never sent
   * the input or credentials the agent asked for, and no workflow runs for them). Each goes with its event log (its push configs and push dead letters cascade); a task whose events are not all on its
   * agent's events topic yet is kept until they are. Rows another purge holds are skipped. Answers how many tasks
   * (the retention, libs/storage/retention-purge.ts).
   */
  async purgeOlderThan(cutoff: Date, limit = DEAD_LETTER_PURGE_BATCH): Promise<number> {
    const rows: unknown[] = await this.db.query(
      `WITH doomed AS (
         SELECT id FROM a2a_tasks
          WHERE state IN (${[...SETTLED].map((s) => `'${s}'`).join(', ')}) AND updated_at < $1 AND event_seq <= published_seq
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

  async get(tenant: string, id: string): Promise<StoredTask | undefined> {
    const rows: RawTask[] = await this.db.query(`SELECT ${COLUMNS} FROM a2a_tasks WHERE id = $1 AND tenant = $2`, [
      id,
      tenant,
    ]);
    return rows.length === 0 ? undefined : taskOf(rows[0]);
  }

  /**
   * Moves `read` (the task as the caller read it) to `change.state`, if the transition is legal from the state read
   * and nobody changed the task since (its version is still `read.version`). Says what it did, or why not. The
   * change's events (task-events.ts: its artifacts, its status) are appended in the same transaction: their seqs are
   * reserved by the UPDATE itself (`event_seq`), under the row lock that serialises the task's changes.
   */
  async transition(read: StoredTask, change: TaskChange): Promise<TransitionResult> {
    if (!isLegalTransition(read.state, change.state)) return { changed: false, reason: 'illegal', task: read };
    // The row's new version is known before the write (the compare-and-set holds only if the row is still `read`),
    // and so are its events, numbered after the read's last: the update and the events' insert are one statement
    // (one round trip; atomic, as any statement is), the insert taking effect only if the update found the row.
    // The time is this process's clock, never before the change read (instances' clocks may differ a little): a
    // task's changes keep their order in time, which `ListTasks` filters on.
    const at = new Date(Math.max(Date.now(), read.updatedAt.getTime() + 1));
    const after: TaskVersion = {
      id: read.id,
      contextId: change.contextId ?? read.contextId,
      state: change.state,
      statusMessage: change.statusMessage === undefined ? read.statusMessage : change.statusMessage,
      history: change.history ?? read.history,
      artifacts: change.artifacts ?? read.artifacts,
      metadata: read.metadata,
      updatedAt: at,
    };
    const drafts = draftsOf(read, after);
    const events = eventsOf(drafts, after, read.eventSeq + 1);
    const rows: RawTask[] = await this.db.query(
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
    const changed = rows.length === 1 ? taskOf(rows[0]) : undefined;
    if (changed) {
      this.committed?.(changed);
      return { changed: true, task: changed };
    }
    const now = await this.get(read.tenant, read.id);
    return now ? { changed: false, reason: 'stale', task: now } : { changed: false, reason: 'missing' };
  }

  /**
   * One page of the tenant's tasks of an agent, newest first (by creation, then id), filtered by context, state and
   * last change. `after` is the id of the last task of the previous page; `more` says whether another page follows.
   */
  async list(
    tenant: string,
    agent: string,
    page: { size: number; after?: string; contextId?: string; state?: A2AState; changedAfter?: Date },
  ): Promise<{ tasks: StoredTask[]; total: number; more: boolean }> {
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
    const rows: RawTask[] = await this.db.query(
      `SELECT ${COLUMNS} FROM a2a_tasks WHERE ${filtered}${cursor} ORDER BY created_at DESC, id DESC LIMIT $${pageParams.length}`,
      pageParams,
    );
    return { tasks: rows.slice(0, page.size).map(taskOf), total, more: rows.length > page.size };
  }
}

import type { DataSource } from 'typeorm';
import {
  A2ATaskRows,
  DEAD_LETTER_PURGE_BATCH,
  type NewTaskRow,
  type StoredTaskRow,
  type TaskRowChange,
} from '@libs/storage';
import { createdEventOf, draftsOf, eventsOf, TaskVersion } from './task-events';
import { A2AState, isLegalTransition, SETTLED } from './task-states';

/** A task as the mesh stores it (`a2a_tasks`, libs/storage/a2a/task-rows.ts). Messages and artifacts are A2A v1.0 JSON. */
export type StoredTask = StoredTaskRow<A2AState>;

/** What a transition changes besides the state; absent fields keep their value. */
export type TaskChange = TaskRowChange<A2AState>;

/** A transition's outcome: the task as changed, or why nothing changed and the task as it is now. */
export type TransitionResult =
  | { changed: true; task: StoredTask }
  /** `illegal`: the state read may not move to the one asked (terminal, or back to submitted). */
  | { changed: false; reason: 'illegal'; task: StoredTask }
  /** `stale`: another change moved the version on since it was read; `task` is the winner's. */
  | { changed: false; reason: 'stale'; task: StoredTask }
  | { changed: false; reason: 'missing' };

export type NewTask = NewTaskRow;

/**
 * The `a2a_tasks` table. Every read and write names the tenant (another tenant's task is not there). State changes
 * are compare-and-set on `version`: a change is applied only if the task is still at the version the caller read,
 * and only if that version's state may move to the new one; a cancel racing a completion thus leaves exactly one
 * outcome, whichever committed first, on every instance. Every write appends what it changed to the task's event
 * log (task-events.ts) in its own transaction: a change is recorded with its events or not at all, and the log is the
 * task's history in the order the changes committed (what SSE streams read, from any instance).
 */
export class A2ATaskStore {
  private readonly rows: A2ATaskRows<A2AState>;

  constructor(
    db: DataSource,
    /** Told of each task whose change (and its events) committed: the events topic's publisher (task-event-publisher.ts). */
    private readonly committed?: (task: StoredTask) => void,
  ) {
    this.rows = new A2ATaskRows(db);
  }

  /** A new task, `submitted`, version 0; its log begins with it (event 1, a `task` snapshot). */
  async create(task: NewTask): Promise<StoredTask> {
    const at = new Date();
    // The row and its first event in one statement (one round trip, atomic as any statement is): the event is the
    // task as created, which is known before the insert, timestamps included (they are given, not defaulted).
    const event = createdEventOf({ ...task, state: 'submitted', statusMessage: null, artifacts: [], updatedAt: at });
    const created = await this.rows.insert(task, at, [event]);
    this.committed?.(created);
    return created;
  }

  /**
   * Deletes at most `limit` settled tasks whose last change was before `cutoff`, oldest first: tasks that ended (a
   * terminal state), and tasks left waiting for their client (input-required, auth-required: the client never sent
   * the input or credentials the agent asked for, and no workflow runs for them). Each goes with its event log (its
   * push configs and push dead letters cascade); a task whose events are not all on its agent's events topic yet is
   * kept until they are. Rows another purge holds are skipped. Answers how many tasks (the retention,
   * libs/storage/retention-purge.ts).
   */
  purgeOlderThan(cutoff: Date, limit = DEAD_LETTER_PURGE_BATCH): Promise<number> {
    return this.rows.purgeOlderThan(cutoff, limit, SETTLED);
  }

  get(tenant: string, id: string): Promise<StoredTask | undefined> {
    return this.rows.get(tenant, id);
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
    const changed = await this.rows.update(read, change, at, events);
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
  list(
    tenant: string,
    agent: string,
    page: { size: number; after?: string; contextId?: string; state?: A2AState; changedAfter?: Date },
  ): Promise<{ tasks: StoredTask[]; total: number; more: boolean }> {
    return this.rows.list(tenant, agent, page);
  }
}

import { isDeepStrictEqual } from 'node:util';
import { taskStateToJSON } from '@a2a-js/sdk';
import type { EntityManager } from 'typeorm';
import { readTaskEvents } from '@libs/storage';
import { A2AState, wireStateOf } from './task-states';

type Json = Record<string, unknown>;

/** What an event of a task's log is: a snapshot of the whole task, or one of the A2A stream's two update events. */
export type TaskEventKind = 'task' | 'status-update' | 'artifact-update';

/** One event of a task's log (`a2a_task_events`), as A2A v1.0 JSON. */
export interface TaskEvent {
  taskId: string;
  /** From 1, one more per event of the task: the SSE `id:` of the event, what `Last-Event-ID` names. */
  seq: number;
  kind: TaskEventKind;
  /** A `Task` (kind `task`), a `TaskStatusUpdateEvent` or a `TaskArtifactUpdateEvent`. */
  payload: Json;
}

/** What the events of a change are made of: the task as it was, and as the change left it (its new row). */
export interface TaskVersion {
  id: string;
  contextId: string;
  state: A2AState;
  statusMessage: Json | null;
  history: Json[];
  artifacts: Json[];
  metadata: Json;
  updatedAt: Date;
}

/** The task as A2A v1.0 JSON (`Task`): its status timestamp is its last change. */
export function taskJsonOf(task: TaskVersion): Json {
  return {
    id: task.id,
    contextId: task.contextId,
    status: statusJsonOf(task),
    artifacts: task.artifacts,
    history: task.history,
    metadata: task.metadata,
  };
}

function statusJsonOf(task: TaskVersion): Json {
  return {
    state: taskStateToJSON(wireStateOf(task.state)),
    timestamp: task.updatedAt.toISOString(),
    ...(task.statusMessage ? { message: task.statusMessage } : {}),
  };
}

/** A change's events before it is applied: their kinds and artifacts, so that the change can reserve their seqs. */
export interface EventDrafts {
  /** The artifacts the change adds or replaces (by `artifactId`), in the change's order. */
  artifacts: Json[];
  /** Whether the change logs a status update (it does whenever it logs nothing else). */
  status: boolean;
}

/**
 * Whether two JSON values say the same, whatever the order of their keys (a task read back from Postgres has its
 * jsonb's order, one built from an agent's answer the SDK's); absent and null are the same.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(a ?? null, b ?? null);
}

/**
 * The events a change of `before` into `after` logs: one `artifact-update` per artifact it added or replaced (the
 * whole artifact: `append` false, `lastChunk` true), then one `status-update` when the state or its message changed,
 * or when the change logs nothing else (a change always leaves a trace). Artifacts come first, so a terminal status
 * is the last event of its change, and of the task.
 */
export function draftsOf(
  before: Pick<TaskVersion, 'state' | 'statusMessage' | 'artifacts'>,
  after: Pick<TaskVersion, 'state' | 'statusMessage' | 'artifacts'>,
): EventDrafts {
  const old = new Map(before.artifacts.map((a) => [a.artifactId, a]));
  const artifacts = after.artifacts.filter((a) => !sameJson(old.get(a.artifactId), a));
  const statusChanged = before.state !== after.state || !sameJson(before.statusMessage, after.statusMessage);
  return { artifacts, status: statusChanged || artifacts.length === 0 };
}

/** The drafts as events of the task as changed (`after`, its new row), numbered from `firstSeq`. */
export function eventsOf(drafts: EventDrafts, after: TaskVersion, firstSeq: number): TaskEvent[] {
  const events: TaskEvent[] = drafts.artifacts.map((artifact, i) => ({
    taskId: after.id,
    seq: firstSeq + i,
    kind: 'artifact-update',
    payload: { taskId: after.id, contextId: after.contextId, artifact, append: false, lastChunk: true },
  }));
  if (drafts.status) {
    events.push({
      taskId: after.id,
      seq: firstSeq + events.length,
      kind: 'status-update',
      payload: { taskId: after.id, contextId: after.contextId, status: statusJsonOf(after) },
    });
  }
  return events;
}

/** The first event of every task: the task as created. */
export function createdEventOf(task: TaskVersion): TaskEvent {
  return { taskId: task.id, seq: 1, kind: 'task', payload: taskJsonOf(task) };
}

/** Reads a task's log: the events after `afterSeq`, oldest first, at most `limit`. */
export function readEvents(
  db: Pick<EntityManager, 'query'>,
  taskId: string,
  afterSeq: number,
  limit: number,
): Promise<TaskEvent[]> {
  return readTaskEvents<TaskEventKind, Json>(db, taskId, afterSeq, limit);
}

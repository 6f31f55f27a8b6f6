import { Artifact, Message, TaskState } from '@a2a-js/sdk';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { A2AState, isA2AState, stateOf } from './task-states';
import type { A2ATaskStore, StoredTask, TaskChange } from './task-store';

type Json = Record<string, unknown>;

/** How often an update tries again after another change won the compare-and-set. */
const CAS_ATTEMPTS = 3;

/**
 * What a mesh-subscriber agent posts for one of its tasks (`POST /a2a/agents/{name}/tasks/{id}/updates`): the task's
 * new state (`TASK_STATE_WORKING` or `working`, ...), optionally a status message and artifacts (A2A v1.0 JSON).
 * Artifacts are added to the task's (one with the id of an earlier one replaces it).
 */
export interface AgentUpdate {
  state: A2AState;
  message?: Json;
  artifacts: Json[];
}

function invalid(field: string, message: string): EventMeshError {
  return new EventMeshError(ErrorCode.InvalidRequest, `${field}: ${message}`, { field });
}

/** An update's body, validated (a 400 naming the first bad field otherwise). */
export function parseAgentUpdate(body: unknown): AgentUpdate {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalid('body', 'an object { state, message?, artifacts? }');
  const { state: rawState, message, artifacts } = body as Json;
  const state =
    typeof rawState !== 'string'
      ? undefined
      : isA2AState(rawState)
        ? rawState
        : stateOf(TaskState[rawState as keyof typeof TaskState]);
  if (state === undefined || state === 'submitted')
    throw invalid(
      'state',
      'a task state the agent may report: working, input-required, auth-required, completed, failed, canceled, rejected (or TASK_STATE_*)',
    );
  const update: AgentUpdate = { state, artifacts: [] };
  if (message !== undefined) {
    const decoded = Message.fromJSON(message);
    if (decoded.parts.length === 0) throw invalid('message.parts', 'a status message needs at least one part');
    update.message = Message.toJSON(decoded) as Json;
  }
  if (artifacts !== undefined) {
    if (!Array.isArray(artifacts)) throw invalid('artifacts', 'an array of A2A artifacts');
    artifacts.forEach((a, i) => {
      const decoded = Artifact.fromJSON(a);
      if (decoded.artifactId === '' || decoded.parts.length === 0)
        throw invalid(`artifacts.${i}`, 'an artifact needs an artifactId and at least one part');
      update.artifacts.push(Artifact.toJSON(decoded) as Json);
    });
  }
  return update;
}

/**
 * Records a mesh-subscriber agent's update of a task with a compare-and-set (task-store.ts), trying again from a fresh
 * read when another change won. A transition the rules refuse (the task already ended, or back to submitted) is a
 * 409 `ILLEGAL_TRANSITION` naming the task's state; a task that is not the tenant's and the agent's, a 404.
 */
export async function applyAgentUpdate(
  tasks: A2ATaskStore,
  tenant: string,
  agent: string,
  taskId: string,
  update: AgentUpdate,
): Promise<StoredTask> {
  let task = await tasks.get(tenant, taskId);
  for (let attempt = 0; task && task.agent === agent && attempt < CAS_ATTEMPTS; attempt++) {
    const artifacts = [
      ...task.artifacts.filter((a) => !update.artifacts.some((n) => n.artifactId === a.artifactId)),
      ...update.artifacts,
    ];
    const change: TaskChange = { state: update.state, artifacts };
    if (update.message) {
      const message = { ...update.message, taskId: task.id, contextId: task.contextId };
      change.statusMessage = message;
      change.history = [...task.history, message];
    }
    const result = await tasks.transition(task, change);
    if (result.changed) return result.task;
    if (result.reason === 'illegal') {
      throw new EventMeshError(
        ErrorCode.IllegalTransition,
        `task ${taskId} is ${task.state}: it cannot move to ${update.state}`,
        { state: task.state },
      );
    }
    task = result.reason === 'stale' ? result.task : undefined;
  }
  if (!task || task.agent !== agent)
    throw new EventMeshError(ErrorCode.TaskNotFound, `no task ${taskId} of agent ${agent}`);
  throw new EventMeshError(
    ErrorCode.IllegalTransition,
    `task ${taskId} kept changing; post the update again`,
    { state: task.state },
    true,
  );
}

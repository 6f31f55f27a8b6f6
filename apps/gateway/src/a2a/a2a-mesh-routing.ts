import { A2A_ERROR_CODE } from '@a2a-js/sdk/errors';

/** The message metadata key naming the skill of the mesh's card (an agent's name) a message is for. */
export const SKILL_ID_METADATA = 'skillId';

interface RpcError {
  code: number;
  message: string;
}

/**
 * Where a call to the mesh's own endpoint goes: the agent owning a skill, the agent of a task, the tenant's only agent
 * when the call names neither (`unnamed`, the error when the tenant has none or several), or nowhere (why).
 */
export type MeshRoute = { skill: string } | { task: string } | { unnamed: RpcError } | { refused: RpcError };

/** The methods that send a message (v1.0 and v0.3 names): routed by the message's skill, or by the task it continues. */
const SEND_METHODS = new Set(['SendMessage', 'SendStreamingMessage', 'message/send', 'message/stream']);

/**
 * The methods that name a task: routed to the task's agent. The task is `params.taskId` for the push config methods
 * of v1.0 (whose `id` is the config's) and for v0.3's `set`; `params.id` for the others.
 */
const TASK_METHODS = new Set([
  'GetTask',
  'CancelTask',
  'SubscribeToTask',
  'CreateTaskPushNotificationConfig',
  'GetTaskPushNotificationConfig',
  'ListTaskPushNotificationConfigs',
  'DeleteTaskPushNotificationConfig',
  'tasks/get',
  'tasks/cancel',
  'tasks/resubscribe',
  'tasks/pushNotificationConfig/set',
  'tasks/pushNotificationConfig/get',
  'tasks/pushNotificationConfig/list',
  'tasks/pushNotificationConfig/delete',
]);

/** The protocol's methods that name no agent and no task: each agent's own endpoint serves them. */
const AGENT_ONLY_METHODS = new Set([
  'ListTasks',
  'GetExtendedAgentCard',
  'tasks/list',
  'agent/getAuthenticatedExtendedCard',
]);

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
const objectOf = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

/**
 * Where a JSON-RPC request to the mesh's own endpoint goes (docs/a2a.md, "The mesh's own card"): a message to the
 * agent named by its metadata's `skillId` (the mesh card's skill ids are the tenant's agents' names; or a skill id of
 * one agent's own card), else, when it continues a task (`taskId`), to that task's agent; a call naming a task, to
 * the task's agent. A call naming neither goes to the tenant's only agent (a client or test kit that knows nothing of
 * skills, such as the A2A TCK, talks to a mesh of one agent as to that agent); with none or several, a message is
 * refused -32602, ListTasks and the extended card -32004 (the agent's own endpoint serves them), any other -32601.
 */
export function meshRouteOf(method: string, params: unknown): MeshRoute {
  const p = objectOf(params);
  if (SEND_METHODS.has(method)) {
    const message = objectOf(p.message);
    const skill = text(objectOf(message.metadata)[SKILL_ID_METADATA]);
    if (skill) return { skill };
    const task = text(message.taskId);
    if (task) return { task };
    return {
      unnamed: {
        code: A2A_ERROR_CODE.INVALID_PARAMS,
        message: `Invalid params: message.metadata.${SKILL_ID_METADATA} names the skill of the mesh's card (the agent) to send to`,
      },
    };
  }
  if (TASK_METHODS.has(method)) {
    const task = text(p.taskId) ?? text(p.id);
    return task ? { task } : refused(A2A_ERROR_CODE.INVALID_PARAMS, 'Invalid params: a task id is required');
  }
  if (AGENT_ONLY_METHODS.has(method))
    return {
      unnamed: {
        code: A2A_ERROR_CODE.UNSUPPORTED_OPERATION,
        message: `${method} is served at each agent's own endpoint (its card's URL is in the mesh card's skill)`,
      },
    };
  return { unnamed: { code: A2A_ERROR_CODE.METHOD_NOT_FOUND, message: `Method not found: ${method}` } };
}

function refused(code: number, message: string): MeshRoute {
  return { refused: { code, message } };
}

import { randomUUID } from 'node:crypto';
import { AgentCard, Message, Task, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import {
  A2AError,
  ExtendedAgentCardNotConfiguredError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type { EventFrame } from '../frame';
import type { PublishReceipt } from '../kafka';
import { createLogger } from '../logging';
import { taskToFrame } from './a2a-frame.adaptor';
import type { StoredAgent } from './agent-store';
import { PushConfigMethods } from './push-config-methods';
import type { PushConfigStore } from './push-configs';
import { requestTopicOf } from './request-topic';
import { AgentUnreachable, agentMessage, TaskRelay } from './task-relay';
import { A2AState, stateOf, TERMINAL, wireStateOf } from './task-states';
import type { A2ATaskStore, StoredTask } from './task-store';
import type { TaskWorkflows } from './task-workflows';

type Json = Record<string, unknown>;
type Params<M extends keyof A2ARequestHandler> = Parameters<A2ARequestHandler[M]>[0];

const log = createLogger('A2ATasks');

/** ListTasks page sizes (A2A v1.0: 1 to 100; 50 when absent). */
const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 100;

/** What one call of the mesh's A2A endpoint needs: the caller's tenant, the agent, the stores and the task workflows. */
export interface MeshTaskScope {
  tenant: string;
  agent: StoredAgent;
  /** The card the mesh serves for the agent (agent-card.ts, meshCardOf). */
  card: Json;
  tasks: A2ATaskStore;
  workflows: TaskWorkflows;
  /** Cancels a task whose workflow no longer runs (it settled, e.g. `input-required`) in this process. */
  relay: TaskRelay;
  /** Writes a frame to Kafka (the gateway's producer). */
  publish(topic: string, frame: EventFrame): Promise<PublishReceipt>;
  /** How long a blocking send waits for its task to settle (EVENTMESH_AGENTS_SEND_WAIT_MS). */
  sendWaitMs: number;
  /** The tasks' push notification configs, and the sink rules their URLs are held to. */
  pushConfigs: PushConfigStore;
  checkUrl(url: string): Promise<void>;
}

/**
 * The mesh's side of the A2A protocol for one agent of one tenant, behind the SDK's transport handlers (JSON-RPC
 * v1.0 and v0.3, HTTP+JSON v1.0). A send creates the task in Postgres (the mesh's own id, `submitted`), writes its
 * request to the agent's request topic (the A2A adaptor: message to frame), and starts the task's workflow
 * `a2a-task/<id>`, which sees it through (workflows/a2a-task.workflow.ts); a blocking send waits for the workflow,
 * bounded. Reads come from Postgres; a cancel goes to the workflow (an update). Tasks of other tenants and other
 * agents are not found. Push notification configs: push-config-methods.ts. Streaming, resubscription and
 * continuing a task are refused as unsupported (docs/a2a.md).
 */
export class MeshTaskHandler implements A2ARequestHandler {
  /**
   * The error of this call that is not one of the protocol's (Postgres down, a bug, an agent that did not answer).
   * The SDK's transport handler answers it as -32603 with its message; the route reads it here to answer for it
   * itself (503 for Postgres, no internal detail otherwise).
   */
  unexpected?: unknown;

  private readonly pushes: PushConfigMethods;

  constructor(private readonly scope: MeshTaskScope) {
    this.pushes = new PushConfigMethods({ find: (id) => this.find(id), configs: scope.pushConfigs, checkUrl: scope.checkUrl, workflows: scope.workflows });
  }

  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (e) {
      if (!(e instanceof A2AError)) this.unexpected = e;
      throw e;
    }
  }

  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(AgentCard.fromJSON(this.scope.card));
  }

  getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    return Promise.reject(new ExtendedAgentCardNotConfiguredError('the mesh serves no extended agent card'));
  }

  sendMessage(params: Params<'sendMessage'>, context: ServerCallContext): Promise<Message | Task> {
    return this.guard(() => this.send(params, context));
  }

  private async send(params: Params<'sendMessage'>, context: ServerCallContext): Promise<Message | Task> {
    this.checkTenant(context);
    const message = params.message;
    if (!message || message.parts.length === 0 || message.messageId === '') throw new RequestMalformedError('message: a message with a messageId and at least one part is required');
    if (message.taskId) throw new UnsupportedOperationError('continuing a task (message.taskId) is not supported by the mesh yet');
    const pushConfig = params.configuration?.taskPushNotificationConfig;
    const push = pushConfig ? await this.pushes.validate(pushConfig, context) : undefined;
    const { tenant, agent } = this.scope;
    const id = randomUUID();
    const contextId = message.contextId || randomUUID();
    const created = await this.scope.tasks.create({
      id,
      tenant,
      agent: agent.name,
      contextId,
      history: [Message.toJSON({ ...message, taskId: id, contextId }) as Json],
      metadata: params.metadata ?? {},
    });
    const topic = requestTopicOf(tenant, agent.name);
    try {
      if (push) await this.scope.pushConfigs.put(created, push);
      // The push config (its token) stays in Postgres: the request travels without it.
      const request = push && params.configuration ? { ...params, configuration: { ...params.configuration, taskPushNotificationConfig: undefined } } : params;
      const receipt = await this.scope.publish(topic, taskToFrame({ taskId: id, contextId, agent: agent.name }, request, created.createdAt));
      await this.scope.workflows.start(created, agent.style, { topic, partition: receipt.partition, offset: receipt.offset }, push !== undefined);
    } catch (e) {
      // Not taken: the task fails at once (a record already written is delivered by nobody: no workflow runs it).
      log.warn({ agent: agent.name, task: id, error: (e as Error).message }, 'the task could not be handed to the mesh; it fails');
      await this.scope.tasks.transition(created, { state: 'failed', statusMessage: agentMessage(created, 'the mesh could not take the task') }).catch(() => undefined);
      throw e;
    }
    if (params.configuration?.returnImmediately) return toWireTask(created, params.configuration.historyLength);
    await this.scope.workflows.waitSettled(id, this.scope.sendWaitMs);
    const now = (await this.scope.tasks.get(tenant, id)) ?? created;
    // An agent that answered a Message (no task of its own): the message is the answer, as the agent gave it.
    if (now.state === 'completed' && now.agentTaskId === null && now.statusMessage) return Message.fromJSON({ ...now.statusMessage, taskId: '' });
    return toWireTask(now, params.configuration?.historyLength);
  }

  getTask(params: Params<'getTask'>, context: ServerCallContext): Promise<Task> {
    return this.guard(async () => {
      this.checkTenant(context);
      return toWireTask(await this.find(params.id), params.historyLength);
    });
  }

  cancelTask(params: Params<'cancelTask'>, context: ServerCallContext): Promise<Task> {
    return this.guard(() => this.cancel(params, context));
  }

  private async cancel(params: Params<'cancelTask'>, context: ServerCallContext): Promise<Task> {
    this.checkTenant(context);
    const task = await this.find(params.id);
    if (TERMINAL.has(task.state)) throw new TaskNotCancelableError(`task ${task.id} is ${task.state}`);
    let outcome = await this.scope.workflows.cancel(task.id);
    if (outcome === 'not-running') outcome = await this.scope.relay.cancel({ taskId: task.id, tenant: task.tenant, agent: task.agent });
    switch (outcome.outcome) {
      case 'canceled':
        return toWireTask(await this.find(task.id));
      case 'not-cancelable':
        throw new TaskNotCancelableError(`task ${task.id} is ${outcome.state ?? 'settled'}`);
      case 'unreachable':
        throw new AgentUnreachable(outcome.reason ?? 'the agent could not be reached to cancel its task');
      default:
        throw new TaskNotFoundError(`no task ${params.id}`);
    }
  }

  listTasks(params: Params<'listTasks'>, context: ServerCallContext): ReturnType<A2ARequestHandler['listTasks']> {
    return this.guard(() => this.list(params, context));
  }

  private async list(params: Params<'listTasks'>, context: ServerCallContext): Promise<Awaited<ReturnType<A2ARequestHandler['listTasks']>>> {
    this.checkTenant(context);
    const size = params.pageSize ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) throw new RequestMalformedError(`pageSize: 1 to ${MAX_PAGE_SIZE}`);
    const after = params.pageToken ? decodePageToken(params.pageToken) : undefined;
    const state = params.status === TaskState.TASK_STATE_UNSPECIFIED ? undefined : stateOf(params.status);
    if (params.status !== TaskState.TASK_STATE_UNSPECIFIED && state === undefined) throw new RequestMalformedError('status: not a task state');
    const changedAfter = params.statusTimestampAfter === undefined ? undefined : new Date(params.statusTimestampAfter);
    if (changedAfter && Number.isNaN(changedAfter.getTime())) throw new RequestMalformedError('statusTimestampAfter: not a timestamp');
    const page = await this.scope.tasks.list(this.scope.tenant, this.scope.agent.name, { size, after, contextId: params.contextId || undefined, state, changedAfter });
    const last = page.tasks[page.tasks.length - 1];
    return {
      tasks: page.tasks.map((t) => {
        const wire = toWireTask(t, params.historyLength);
        return params.includeArtifacts ? wire : { ...wire, artifacts: [] };
      }),
      nextPageToken: page.more && last ? encodePageToken(last.id) : '',
      pageSize: size,
      totalSize: page.total,
    };
  }

  // eslint-disable-next-line require-yield
  async *sendMessageStream(): AsyncGenerator<never, void, undefined> {
    throw new UnsupportedOperationError('streaming is not supported by the mesh yet');
  }

  // eslint-disable-next-line require-yield
  async *resubscribe(): AsyncGenerator<never, void, undefined> {
    throw new UnsupportedOperationError('resubscribing is not supported by the mesh yet');
  }

  createTaskPushNotificationConfig(params: Params<'createTaskPushNotificationConfig'>, context: ServerCallContext): ReturnType<A2ARequestHandler['createTaskPushNotificationConfig']> {
    return this.guard(async () => {
      this.checkTenant(context);
      return this.pushes.create(params, context);
    });
  }

  getTaskPushNotificationConfig(params: Params<'getTaskPushNotificationConfig'>, context: ServerCallContext): ReturnType<A2ARequestHandler['getTaskPushNotificationConfig']> {
    return this.guard(async () => {
      this.checkTenant(context);
      return this.pushes.get(params);
    });
  }

  listTaskPushNotificationConfigs(params: Params<'listTaskPushNotificationConfigs'>, context: ServerCallContext): ReturnType<A2ARequestHandler['listTaskPushNotificationConfigs']> {
    return this.guard(async () => {
      this.checkTenant(context);
      return this.pushes.list(params);
    });
  }

  deleteTaskPushNotificationConfig(params: Params<'deleteTaskPushNotificationConfig'>, context: ServerCallContext): Promise<void> {
    return this.guard(async () => {
      this.checkTenant(context);
      await this.pushes.delete(params);
    });
  }

  /** The tenant is the gate's: a `tenant` parameter naming another one is refused (the SDK sets it from params). */
  private checkTenant(context: ServerCallContext): void {
    if (context.tenant !== undefined && context.tenant !== '' && context.tenant !== this.scope.tenant) {
      throw new RequestMalformedError('tenant: the caller\'s credentials decide the tenant; leave it empty');
    }
  }

  private async find(id: string): Promise<StoredTask> {
    if (!id) throw new RequestMalformedError('id: a task id is required');
    const task = await this.scope.tasks.get(this.scope.tenant, id);
    if (!task || task.agent !== this.scope.agent.name) throw new TaskNotFoundError(`no task ${id}`);
    return task;
  }
}

/** The stored task as the A2A v1.0 `Task` the SDK serialises; `historyLength` as the spec says (0: none). */
export function toWireTask(task: StoredTask, historyLength?: number): Task {
  const history = historyLength === undefined ? task.history : historyLength <= 0 ? [] : task.history.slice(-historyLength);
  return Task.fromJSON({
    id: task.id,
    contextId: task.contextId,
    status: { state: taskStateToJSON(wireStateOf(task.state)), timestamp: task.updatedAt.toISOString(), ...(task.statusMessage ? { message: task.statusMessage } : {}) },
    artifacts: task.artifacts,
    history,
    metadata: task.metadata,
  });
}

/** ListTasks page tokens: opaque to clients, the id of the last task of the page. */
function encodePageToken(id: string): string {
  return Buffer.from(JSON.stringify({ after: id })).toString('base64url');
}

function decodePageToken(token: string): string {
  try {
    const decoded = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { after?: unknown };
    if (typeof decoded.after === 'string' && decoded.after !== '') return decoded.after;
  } catch {
    // falls through to the refusal
  }
  throw new RequestMalformedError('pageToken: not a token this server issued');
}

export type { A2AState };

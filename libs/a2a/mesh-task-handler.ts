import { randomUUID } from 'node:crypto';
import { AgentCard, Artifact, Message, Task, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import {
  A2AError,
  ExtendedAgentCardNotConfiguredError,
  InvalidAgentResponseError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import { createLogger } from '../logging';
import type { AgentClients } from './agent-clients';
import type { StoredAgent } from './agent-store';
import { A2AState, stateOf, TERMINAL, wireStateOf } from './task-states';
import type { A2ATaskStore, StoredTask, TaskChange } from './task-store';

type Json = Record<string, unknown>;
type Params<M extends keyof A2ARequestHandler> = Parameters<A2ARequestHandler[M]>[0];

const log = createLogger('A2ATasks');

/** ListTasks page sizes (A2A v1.0: 1 to 100; 50 when absent). */
const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 100;
/** How often a cancel re-reads and tries again when another change won the compare-and-set. */
const CANCEL_ATTEMPTS = 3;

/** A call to the agent that got no answer (network, deadline): JSON-RPC's internal error, with this message. */
export class AgentUnreachable extends Error {}

/** What one call of the mesh's A2A endpoint needs: the caller's tenant, the agent, the stores and clients. */
export interface MeshTaskScope {
  tenant: string;
  agent: StoredAgent;
  /** The card the mesh serves for the agent (agent-card.ts, meshCardOf). */
  card: Json;
  tasks: A2ATaskStore;
  clients: AgentClients;
  /** Runs a relay after the answer was sent (a non-blocking SendMessage); the broker tracks it until it ends. */
  background(work: Promise<unknown>): void;
}

/**
 * The mesh's side of the A2A protocol for one agent of one tenant, behind the SDK's JSON-RPC transport handlers
 * (v1.0 and v0.3): each task gets the mesh's own id and lives in Postgres (task-store.ts, state changes
 * compare-and-set); the agent is called with the SDK's stock client and what it answers is relayed and recorded.
 * Tasks of other tenants and other agents are not found. Streaming, resubscription, push notifications and
 * continuing a task with a second message are refused as unsupported (docs/a2a.md).
 */
export class MeshTaskHandler implements A2ARequestHandler {
  /**
   * The error of this call that is not one of the protocol's (Postgres down, a bug, an agent that did not answer).
   * The SDK's transport handler answers it as -32603 with its message; the route reads it here to answer for it
   * itself (503 for Postgres, no internal detail otherwise).
   */
  unexpected?: unknown;

  constructor(private readonly scope: MeshTaskScope) {}

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
    const id = randomUUID();
    const contextId = message.contextId || randomUUID();
    const created = await this.scope.tasks.create({
      id,
      tenant: this.scope.tenant,
      agent: this.scope.agent.name,
      contextId,
      history: [Message.toJSON({ ...message, taskId: id, contextId }) as Json],
      metadata: params.metadata ?? {},
    });
    const relay = this.relay(created, params);
    if (params.configuration?.returnImmediately) {
      this.scope.background(relay);
      return toWireTask(created, params.configuration.historyLength);
    }
    const outcome = await relay;
    return outcome.message ?? toWireTask(outcome.task, params.configuration?.historyLength);
  }

  getTask(params: Params<'getTask'>, context: ServerCallContext): Promise<Task> {
    return this.guard(() => this.get(params, context));
  }

  private async get(params: Params<'getTask'>, context: ServerCallContext): Promise<Task> {
    this.checkTenant(context);
    let task = await this.find(params.id);
    if (!TERMINAL.has(task.state) && task.agentTaskId) task = await this.refresh(task);
    return toWireTask(task, params.historyLength);
  }

  cancelTask(params: Params<'cancelTask'>, context: ServerCallContext): Promise<Task> {
    return this.guard(() => this.cancel(params, context));
  }

  private async cancel(params: Params<'cancelTask'>, context: ServerCallContext): Promise<Task> {
    this.checkTenant(context);
    let task = await this.find(params.id);
    for (let attempt = 0; attempt < CANCEL_ATTEMPTS; attempt++) {
      if (TERMINAL.has(task.state)) throw new TaskNotCancelableError(`task ${task.id} is ${task.state}`);
      let change: TaskChange = { state: 'canceled', statusMessage: null };
      if (task.agentTaskId) {
        const answered = await this.cancelAtAgent(task);
        if (answered.kind === 'not-cancelable') {
          // The agent finished it first: record what it says, and refuse.
          task = await this.refresh(task);
          throw new TaskNotCancelableError(`task ${task.id} is ${task.state} at the agent`);
        }
        change = answered.change;
      }
      const result = await this.scope.tasks.transition(task, change);
      if (result.changed) return toWireTask(result.task);
      if (result.reason === 'missing') throw new TaskNotFoundError(`no task ${params.id}`);
      task = result.task;
    }
    throw new TaskNotCancelableError(`task ${task.id} kept changing; try again`);
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

  createTaskPushNotificationConfig(): Promise<never> {
    return Promise.reject(new PushNotificationNotSupportedError('push notifications are not supported by the mesh yet'));
  }

  getTaskPushNotificationConfig(): Promise<never> {
    return this.createTaskPushNotificationConfig();
  }

  listTaskPushNotificationConfigs(): Promise<never> {
    return this.createTaskPushNotificationConfig();
  }

  deleteTaskPushNotificationConfig(): Promise<never> {
    return this.createTaskPushNotificationConfig();
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

  /**
   * Sends the task's first message to the agent (blocking at the agent) and records its answer with a
   * compare-and-set from the version created: if the task was canceled meanwhile, the cancel stands, the answer is
   * dropped and the agent is asked to cancel its task. A failed call fails the task.
   */
  private async relay(created: StoredTask, params: Params<'sendMessage'>): Promise<{ task: StoredTask; message?: Message }> {
    // What the agent is sent: the caller's message and settings, as a new task at the agent; the mesh waits for it.
    const outbound = {
      ...params,
      tenant: '',
      message: { ...params.message!, taskId: '' },
      configuration: params.configuration && { ...params.configuration, returnImmediately: false, taskPushNotificationConfig: undefined },
    };
    let change: TaskChange;
    let reply: Message | undefined;
    let agentTask: Task | undefined;
    try {
      const client = await this.scope.clients.clientFor(this.scope.agent);
      const answer = await client.sendMessage(outbound, this.scope.clients.callOptions());
      if ('messageId' in answer) {
        reply = { ...answer, taskId: '' };
        change = { state: 'completed', statusMessage: Message.toJSON({ ...answer, taskId: created.id }) as Json, history: [...created.history, Message.toJSON({ ...answer, taskId: created.id }) as Json] };
      } else {
        agentTask = answer;
        change = this.changeOf(created, answer);
      }
    } catch (e) {
      log.warn({ agent: this.scope.agent.name, task: created.id, error: (e as Error).message }, 'agent call failed; the task fails');
      change = { state: 'failed', statusMessage: agentMessage(created, e instanceof InvalidAgentResponseError ? 'the agent answered what is not an A2A task' : `the agent could not be reached: ${(e as Error).message}`) };
    }
    const result = await this.scope.tasks.transition(created, change);
    if (result.changed) return { task: result.task, message: reply };
    if (result.reason === 'missing') throw new TaskNotFoundError(`task ${created.id} disappeared`);
    // Another change (a cancel) won: it stands; the agent is told, best effort, if its task still runs.
    if (result.task.state === 'canceled' && agentTask && !TERMINAL.has(stateOf(agentTask.status?.state) ?? 'completed')) {
      const client = await this.scope.clients.clientFor(this.scope.agent);
      await client.cancelTask({ tenant: '', id: agentTask.id, metadata: undefined }, this.scope.clients.callOptions()).catch(() => undefined);
    }
    return { task: result.task };
  }

  /** What an agent's task says, as a change of the mesh's task (ids rewritten to the mesh's). */
  private changeOf(task: StoredTask, answer: Task): TaskChange {
    const state = stateOf(answer.status?.state);
    if (!state) {
      return { state: 'failed', statusMessage: agentMessage(task, `the agent answered an invalid task state (${String(answer.status?.state)})`), agentTaskId: answer.id || undefined };
    }
    const rewrite = (m: Message): Json => Message.toJSON({ ...m, taskId: task.id, contextId: answer.contextId || task.contextId }) as Json;
    return {
      state,
      statusMessage: answer.status?.message ? rewrite(answer.status.message) : null,
      history: answer.history.length > 0 ? answer.history.map(rewrite) : task.history,
      artifacts: answer.artifacts.map((a) => Artifact.toJSON(a) as Json),
      agentTaskId: answer.id,
      contextId: answer.contextId || undefined,
    };
  }

  /** The task as the agent has it now, recorded (compare-and-set; a lost race keeps the winner's). */
  private async refresh(task: StoredTask): Promise<StoredTask> {
    let answer: Task;
    try {
      const client = await this.scope.clients.clientFor(this.scope.agent);
      answer = await client.getTask({ tenant: '', id: task.agentTaskId!, historyLength: undefined }, this.scope.clients.callOptions());
    } catch (e) {
      log.warn({ agent: this.scope.agent.name, task: task.id, error: (e as Error).message }, 'agent unreachable; the task is answered as recorded');
      return task;
    }
    const change = this.changeOf(task, answer);
    if (change.state === task.state && TERMINAL.has(task.state)) return task;
    const result = await this.scope.tasks.transition(task, change);
    return result.changed || result.reason !== 'missing' ? result.task : task;
  }

  private async cancelAtAgent(task: StoredTask): Promise<{ kind: 'canceled'; change: TaskChange } | { kind: 'not-cancelable' }> {
    const client: Client = await this.scope.clients.clientFor(this.scope.agent);
    try {
      const answer = await client.cancelTask({ tenant: '', id: task.agentTaskId!, metadata: undefined }, this.scope.clients.callOptions());
      const change = this.changeOf(task, answer);
      if (change.state !== 'canceled') return { kind: 'not-cancelable' };
      return { kind: 'canceled', change };
    } catch (e) {
      if (e instanceof TaskNotCancelableError) return { kind: 'not-cancelable' };
      if (e instanceof A2AError) throw e;
      throw new AgentUnreachable(`the agent could not be reached to cancel its task: ${(e as Error).message}`);
    }
  }
}

/** A status message from the mesh, in the agent's role, about the task. */
function agentMessage(task: StoredTask, text: string): Json {
  return { messageId: randomUUID(), contextId: task.contextId, taskId: task.id, role: 'ROLE_AGENT', parts: [{ text }] };
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

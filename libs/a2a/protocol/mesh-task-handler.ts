import { randomUUID } from 'node:crypto';
import { AgentCard, Message, Role, StreamResponse, Task, TaskState } from '@a2a-js/sdk';
import {
  A2AError,
  ExtendedAgentCardNotConfiguredError,
  InvalidAgentResponseError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type { EventFrame } from '@libs/frame';
import type { PublishReceipt } from '@libs/kafka';
import { createLogger } from '@libs/logging';
import { a2aTaskAdaptor } from './a2a-frame.adaptor';
import type { StoredAgent } from '../agents/agent-store';
import { checkInputModes } from '../agents/input-modes';
import { PushConfigMethods } from './push-config-methods';
import type { PushConfigStore } from '../push/push-configs';
import { decodePageToken, encodePageToken } from './page-token';
import { requestTopicOf } from '../relay/request-topic';
import { AgentUnreachable, agentMessage } from '../relay/agent-task-follower';
import { failedOnInvalidAnswer } from '../relay/invalid-answers';
import { taskJsonOf } from '../tasks/task-events';
import { A2AState, AWAITING_CLIENT, SETTLED, stateOf, TERMINAL } from '../tasks/task-states';
import type { A2ATaskStore, StoredTask } from '../tasks/task-store';
import { parseLastEventId, STREAM_STATE, streamResponseOf, TaskStreams } from '../tasks/task-stream';
import type { TaskWorkflows } from '../temporal/task-workflows';
import type { TaskRequestRecord } from '../../../contracts';

type Json = Record<string, unknown>;
type Params<M extends keyof A2ARequestHandler> = Parameters<A2ARequestHandler[M]>[0];

const log = createLogger('A2ATasks');

/** How often a continuing message tries its compare-and-set again after another change won. */
const CONTINUE_ATTEMPTS = 3;

/** The client's messages in a task's history (role user): its turns so far, as far as the history tells. */
const turnsOf = (task: StoredTask): number => task.history.filter((m) => m.role === 'ROLE_USER').length;

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
  /** Writes a frame to Kafka (the gateway's producer). */
  publish(topic: string, frame: EventFrame): Promise<PublishReceipt>;
  /** How long a blocking send waits for its task to settle (EVENTMESH_AGENTS_SEND_WAIT_MS). */
  sendWaitMs: number;
  /** The gateway's streams of task logs (SendStreamingMessage, SubscribeToTask). */
  streams: TaskStreams;
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
 * agents are not found. Streams (SendStreamingMessage, SubscribeToTask) read the task's event log from Postgres
 * (task-stream.ts), whichever instance took the task. Push notification configs: push-config-methods.ts. A message
 * naming a task that asked for input continues it (continueTask).
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
    this.pushes = new PushConfigMethods({
      find: (id) => this.find(id),
      configs: scope.pushConfigs,
      checkUrl: scope.checkUrl,
      workflows: scope.workflows,
    });
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
    const created = await this.take(params, context);
    if (params.configuration?.returnImmediately) return toWireTask(created, params.configuration.historyLength);
    const settled = await this.scope.workflows.waitSettled(created.id, this.scope.sendWaitMs, { orSettledHere: true });
    const now = settled ?? (await this.scope.tasks.get(this.scope.tenant, created.id)) ?? created;
    // An agent that answered a Message (no task of its own): the message is the answer, as the agent gave it.
    if (now.state === 'completed' && now.agentTaskId === null && now.statusMessage)
      return Message.fromJSON({ ...now.statusMessage, taskId: '' });
    // An agent whose answer was not A2A: the client gets the protocol's error for it, naming the task (failed).
    if (failedOnInvalidAnswer(now))
      throw new InvalidAgentResponseError({
        message: `${textOfStatus(now)} (task ${now.id}, failed)`,
        metadata: { taskId: now.id },
      });
    return toWireTask(now, params.configuration?.historyLength);
  }

  /**
   * Takes a message: as a new task (recorded `submitted`, its request on the agent's topic, its workflow started),
   * or as the next turn of the task it names (continueTask).
   */
  private async take(params: Params<'sendMessage'>, context: ServerCallContext): Promise<StoredTask> {
    this.checkTenant(context);
    const message = params.message;
    if (!message || message.parts.length === 0 || message.messageId === '')
      throw new RequestMalformedError('message: a message with a messageId and at least one part is required');
    // The specification requires the sender's role; a message without one (ROLE_UNSPECIFIED) is malformed.
    if (message.role === Role.ROLE_UNSPECIFIED)
      throw new RequestMalformedError('message.role: ROLE_USER or ROLE_AGENT is required');
    checkHistoryLength(params.configuration?.historyLength);
    checkInputModes(message.parts, this.scope.agent.card);
    if (message.taskId) return this.continueTask(params, message);
    const pushConfig = params.configuration?.taskPushNotificationConfig;
    const push = pushConfig ? await this.pushes.validate(pushConfig, context) : undefined;
    const { tenant, agent } = this.scope;
    const id = randomUUID();
    const contextId = message.contextId || randomUUID();
    const topic = requestTopicOf(tenant, agent.name);
    // The push config (its token) stays in Postgres: the request travels without it.
    const request =
      push && params.configuration
        ? { ...params, configuration: { ...params.configuration, taskPushNotificationConfig: undefined } }
        : params;
    const [frame] = a2aTaskAdaptor.decode({
      ids: { taskId: id, contextId, agent: agent.name },
      request,
      time: new Date(),
    });
    const ids = { taskId: id, tenant, agent: agent.name };
    // This process's worker may run the workflow's first local activity before the task is written: it waits for
    // the first attempt announced here (begun below, or withdrawn).
    const attempt = this.scope.workflows.announceFirstAttempt(agent, ids, 1);
    let written: StoredTask | undefined;
    const create = async (requestRecord?: TaskRequestRecord) => {
      written = await this.scope.tasks.create({
        id,
        tenant,
        agent: agent.name,
        contextId,
        history: [Message.toJSON({ ...message, taskId: id, contextId }) as Json],
        metadata: params.metadata ?? {},
        requestRecord,
      });
      return written;
    };
    // While the workflow starts: for an agent at a URL, the request record, then the task's row naming it, which
    // the deliveries read it by (no delivery sends the task before its row is written; one elsewhere that reads
    // sooner tries again); for a mesh subscriber, whose subscription delivers the record, the row, then the record:
    // the agent may answer the moment its record arrives, and an update of a task whose row is not yet written is
    // refused 404 (seen under load with both written at once). Then the push config.
    const write = async (): Promise<StoredTask> => {
      let row: StoredTask;
      if (agent.style === 'url') {
        const receipt = await this.scope.publish(topic, frame);
        const requestRecord = { topic, partition: receipt.partition, offset: receipt.offset };
        this.scope.workflows.handOff(requestRecord, frame);
        row = await create(requestRecord);
      } else {
        // A record not written after the row: the row is failed below (`written`), never left behind.
        row = await create();
        await this.scope.publish(topic, frame);
      }
      if (push) await this.scope.pushConfigs.put(row, push);
      return row;
    };
    try {
      const [row, start] = await Promise.allSettled([
        write(),
        this.scope.workflows.start(ids, agent, undefined, { push: push !== undefined }),
      ]);
      if (row.status === 'fulfilled' && start.status === 'fulfilled') {
        if (start.value) attempt?.begin(row.value, frame, {});
        return row.value;
      }
      // Not taken: the task fails at once. A workflow started for it is ended (else it finds no row and fails at the
      // task's deadline); a record written is delivered by nobody.
      const error =
        row.status === 'rejected' ? (row.reason as Error) : ((start as PromiseRejectedResult).reason as Error);
      log.warn(
        { agent: agent.name, task: id, error: error.message },
        'the task could not be handed to the mesh; it fails',
      );
      if (start.status === 'fulfilled')
        await this.scope.workflows.abandon(id, `the mesh could not take the task: ${error.message}`);
      if (written)
        await this.scope.tasks
          .transition(written, {
            state: 'failed',
            statusMessage: agentMessage(written, 'the mesh could not take the task'),
          })
          .catch(() => undefined);
      throw error;
    } finally {
      attempt?.end();
    }
  }

  /**
   * A message continuing a task that asked the client for input (`input-required`, `auth-required`): appended to the
   * task's history with a compare-and-set that moves it to `working`, written to the agent's request topic as the
   * task's next turn (frame `<taskId>.<turn>`), and run by a new run of the task's workflow, which sends it to the
   * agent as a message of the agent's task (or, for a mesh subscriber, lets its subscription deliver it). A task
   * that is terminal, or still working, takes no message (-32004); one of another agent or tenant is not found.
   */
  private async continueTask(params: Params<'sendMessage'>, message: Message): Promise<StoredTask> {
    const { tenant, agent } = this.scope;
    let task = await this.find(message.taskId);
    if (message.contextId && message.contextId !== task.contextId) {
      throw new RequestMalformedError(`message.contextId: task ${task.id} is of context ${task.contextId}`);
    }
    let continued: StoredTask | undefined;
    let turn = 0;
    for (let attempt = 0; attempt < CONTINUE_ATTEMPTS && !continued; attempt++) {
      if (!AWAITING_CLIENT.has(task.state)) {
        throw new UnsupportedOperationError(
          `task ${task.id} is ${task.state}: it takes a message only while it asks for one (input-required, auth-required)`,
        );
      }
      // The turn after the last one sent to the agent (or, for a subscriber, written for it).
      turn = Math.max(task.deliveredTurn, turnsOf(task)) + 1;
      const entry = Message.toJSON({ ...message, taskId: task.id, contextId: task.contextId }) as Json;
      const result = await this.scope.tasks.transition(task, { state: 'working', history: [...task.history, entry] });
      if (result.changed) continued = result.task;
      else if (result.reason === 'missing') throw new TaskNotFoundError(`no task ${task.id}`);
      else task = result.task; // another change won: decide again on the task as it is now
    }
    if (!continued) throw new UnsupportedOperationError(`task ${task.id} kept changing; send the message again`);
    const topic = requestTopicOf(tenant, agent.name);
    const ids = { taskId: continued.id, tenant, agent: agent.name };
    const attempt = this.scope.workflows.announceFirstAttempt(agent, ids, turn);
    try {
      const [frame] = a2aTaskAdaptor.decode({
        ids: { taskId: continued.id, contextId: continued.contextId, agent: agent.name },
        request: { ...params, message },
        time: new Date(),
        turn,
      });
      const receipt = await this.scope.publish(topic, frame);
      const request = { topic, partition: receipt.partition, offset: receipt.offset };
      if (agent.style === 'url') this.scope.workflows.handOff(request, frame);
      const push = (await this.scope.pushConfigs.ofTask(tenant, continued.id)).length > 0;
      if (await this.scope.workflows.start(ids, agent, request, { turn, push }))
        attempt?.begin(continued, frame, { request });
    } catch (e) {
      log.warn(
        { agent: agent.name, task: continued.id, turn, error: (e as Error).message },
        'the message continuing the task could not be handed to the mesh; the task fails',
      );
      await this.scope.tasks
        .transition(continued, {
          state: 'failed',
          statusMessage: agentMessage(continued, 'the mesh could not take the message'),
        })
        .catch(() => undefined);
      throw e;
    } finally {
      attempt?.end();
    }
    return continued;
  }

  getTask(params: Params<'getTask'>, context: ServerCallContext): Promise<Task> {
    return this.guard(async () => {
      this.checkTenant(context);
      checkHistoryLength(params.historyLength);
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
    // The task's workflow ended (the task waits for the client): a run of its own cancels it, and pushes the change.
    if (outcome === 'not-running') outcome = await this.scope.workflows.cancelEnded(task);
    switch (outcome.outcome) {
      case 'canceled':
        return toWireTask(await this.find(task.id));
      case 'not-cancelable':
        // Canceled since this call read it (not before: that is refused above), by this very cancel or by one racing
        // it: the workflow's cancel stops the task's delivery, which records the task canceled as it stops, and the
        // cancel step after it then finds the task canceled already (a CI run's history showed that order). What was
        // asked is done: the canceled task is the answer.
        if (outcome.state === 'canceled') return toWireTask(await this.find(task.id));
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

  private async list(
    params: Params<'listTasks'>,
    context: ServerCallContext,
  ): Promise<Awaited<ReturnType<A2ARequestHandler['listTasks']>>> {
    this.checkTenant(context);
    const size = params.pageSize ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE)
      throw new RequestMalformedError(`pageSize: 1 to ${MAX_PAGE_SIZE}`);
    const after = params.pageToken ? decodePageToken(params.pageToken) : undefined;
    const state = params.status === TaskState.TASK_STATE_UNSPECIFIED ? undefined : stateOf(params.status);
    if (params.status !== TaskState.TASK_STATE_UNSPECIFIED && state === undefined)
      throw new RequestMalformedError('status: not a task state');
    checkHistoryLength(params.historyLength);
    const changedAfter = params.statusTimestampAfter === undefined ? undefined : new Date(params.statusTimestampAfter);
    // An ISO 8601 instant (`new Date` alone reads "-1" as the year -1).
    if (changedAfter && (!INSTANT.test(params.statusTimestampAfter!) || Number.isNaN(changedAfter.getTime()))) {
      throw new RequestMalformedError('statusTimestampAfter: an ISO 8601 timestamp, e.g. 2026-12-01T13:00:00Z');
    }
    const page = await this.scope.tasks.list(this.scope.tenant, this.scope.agent.name, {
      size,
      after,
      contextId: params.contextId || undefined,
      state,
      changedAfter,
    });
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

  /**
   * Takes the message as a task (as a send with `returnImmediately`) and streams the task's log from its first event
   * (the task as created) to the event that ends the stream (terminal, or interrupted). A `Last-Event-ID` is not
   * read here: a client that lost this stream resumes it with SubscribeToTask and the id of the last event it got.
   */
  async *sendMessageStream(
    params: Params<'sendMessage'>,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const taken = await this.guard(() => this.take(params, context));
    if (!params.message?.taskId) {
      yield* this.follow(taken.id, 0, context);
      return;
    }
    // A turn continuing a task: the task as it is now (working), then what follows.
    context.state.set(STREAM_STATE.seq, taken.eventSeq);
    yield StreamResponse.fromJSON({ task: Task.toJSON(toWireTask(taken)) });
    yield* this.follow(taken.id, taken.eventSeq, context);
  }

  /**
   * SubscribeToTask. Without `Last-Event-ID`: the task as it is now first (its SSE id is its last event's seq), then
   * its events after it; a terminal task is refused (UnsupportedOperationError, as the specification says). With
   * `Last-Event-ID: <seq>`: exactly the events after that seq (a terminal task too, while events are left to give;
   * an id past the task's last event is refused as malformed).
   */
  async *resubscribe(
    params: Params<'resubscribe'>,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const task = await this.guard(async () => {
      this.checkTenant(context);
      return this.find(params.id);
    });
    const raw = context.state.get(STREAM_STATE.lastEventId);
    const last = parseLastEventId(typeof raw === 'string' ? raw : undefined);
    if (last === null || (last !== undefined && last > task.eventSeq)) {
      throw new RequestMalformedError(`Last-Event-ID: the seq of an event of task ${task.id} (0 to ${task.eventSeq})`);
    }
    if (last === undefined) {
      if (TERMINAL.has(task.state))
        throw new UnsupportedOperationError(
          `task ${task.id} is ${task.state}: a terminal task has no updates to subscribe to`,
        );
      context.state.set(STREAM_STATE.seq, task.eventSeq);
      yield StreamResponse.fromJSON({ task: Task.toJSON(toWireTask(task)) });
      if (SETTLED.has(task.state)) return;
      yield* this.follow(task.id, task.eventSeq, context);
      return;
    }
    if (last === task.eventSeq && SETTLED.has(task.state)) {
      if (TERMINAL.has(task.state))
        throw new UnsupportedOperationError(`task ${task.id} is ${task.state} and has no events after ${last}`);
      return;
    }
    yield* this.follow(task.id, last, context);
  }

  /** The task's log after `afterSeq`, each event's seq told to the route (STREAM_STATE.seq) as it is yielded. */
  private async *follow(
    taskId: string,
    afterSeq: number,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    // The route's signal (a2a-sse.ts: the client gone, the gateway closing); a caller without one reads to the end.
    const signal = context.state.get(STREAM_STATE.signal);
    const events = this.scope.streams.events(
      taskId,
      afterSeq,
      signal instanceof AbortSignal ? signal : new AbortController().signal,
    );
    try {
      for await (const event of events) {
        context.state.set(STREAM_STATE.seq, event.seq);
        yield streamResponseOf(event);
      }
    } catch (e) {
      if (!(e instanceof A2AError)) this.unexpected = e;
      throw e;
    }
  }

  createTaskPushNotificationConfig(
    params: Params<'createTaskPushNotificationConfig'>,
    context: ServerCallContext,
  ): ReturnType<A2ARequestHandler['createTaskPushNotificationConfig']> {
    return this.guard(async () => {
      this.checkTenant(context);
      return this.pushes.create(params, context);
    });
  }

  getTaskPushNotificationConfig(
    params: Params<'getTaskPushNotificationConfig'>,
    context: ServerCallContext,
  ): ReturnType<A2ARequestHandler['getTaskPushNotificationConfig']> {
    return this.guard(async () => {
      this.checkTenant(context);
      return this.pushes.get(params);
    });
  }

  listTaskPushNotificationConfigs(
    params: Params<'listTaskPushNotificationConfigs'>,
    context: ServerCallContext,
  ): ReturnType<A2ARequestHandler['listTaskPushNotificationConfigs']> {
    return this.guard(async () => {
      this.checkTenant(context);
      return this.pushes.list(params);
    });
  }

  deleteTaskPushNotificationConfig(
    params: Params<'deleteTaskPushNotificationConfig'>,
    context: ServerCallContext,
  ): Promise<void> {
    return this.guard(async () => {
      this.checkTenant(context);
      await this.pushes.delete(params);
    });
  }

  /** The tenant is the gate's: a `tenant` parameter naming another one is refused (the SDK sets it from params). */
  private checkTenant(context: ServerCallContext): void {
    if (context.tenant !== undefined && context.tenant !== '' && context.tenant !== this.scope.tenant) {
      throw new RequestMalformedError("tenant: the caller's credentials decide the tenant; leave it empty");
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
/** An ISO 8601 instant with its offset (RFC 3339). */
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/i;

/** `historyLength`, when given: a non-negative integer (A2A v1.0); RequestMalformedError otherwise. */
function checkHistoryLength(historyLength: number | undefined): void {
  if (historyLength !== undefined && (!Number.isInteger(historyLength) || historyLength < 0)) {
    throw new RequestMalformedError('historyLength: a non-negative integer');
  }
}

export function toWireTask(task: StoredTask, historyLength?: number): Task {
  const history =
    historyLength === undefined ? task.history : historyLength <= 0 ? [] : task.history.slice(-historyLength);
  return Task.fromJSON({ ...taskJsonOf(task), history });
}

export type { A2AState };

/** The text of a task's status message (its text parts, joined). */
function textOfStatus(task: StoredTask): string {
  const parts = (task.statusMessage?.parts ?? []) as { text?: unknown }[];
  return parts.map((p) => (typeof p.text === 'string' ? p.text : '')).join('');
}

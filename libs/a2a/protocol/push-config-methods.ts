import type { ListTaskPushNotificationConfigsResponse, TaskPushNotificationConfig } from '@a2a-js/sdk';
import { RequestMalformedError, TaskNotFoundError } from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import {
  checkPushUrl,
  PushConfigInput,
  pushConfigInputOf,
  PushConfigStore,
  toWirePushConfig,
  wireVersionOf,
} from '../push/push-configs';
import { SETTLED } from '../tasks/task-states';
import type { StoredTask } from '../tasks/task-store';
import type { TaskWorkflows } from '../temporal/task-workflows';
import { decodePageToken, encodePageToken } from './page-token';

type Params<M extends keyof A2ARequestHandler> = Parameters<A2ARequestHandler[M]>[0];

/** ListTaskPushNotificationConfigs page sizes: 1 to 100, 100 when absent (a task has at most 10 anyway). */
const MAX_PAGE_SIZE = 100;

export interface PushConfigScope {
  /** The caller's tenant's task of the agent, or TaskNotFoundError (another tenant's, another agent's, none). */
  find(taskId: string): Promise<StoredTask>;
  configs: PushConfigStore;
  /** The sink rules (the SSRF guard of webhook sinks): throws for a URL they refuse. */
  checkUrl(url: string): Promise<void>;
  workflows: TaskWorkflows;
}

/**
 * The push notification config methods of the mesh's A2A endpoint (JSON-RPC v1.0 `*TaskPushNotificationConfig`,
 * v0.3 `tasks/pushNotificationConfig/*`, the HTTP+JSON `tasks/{id}/pushNotificationConfigs` routes), and the config
 * a `SendMessage` carries. Only the caller's tenant's tasks of the agent; the URL held to the sink rules before it
 * is stored (-32602 when refused: nothing connects to it). A config set on a running task is told to the task's
 * workflow, which pushes the task's updates from then on (task-pushes.ts).
 */
export class PushConfigMethods {
  constructor(private readonly scope: PushConfigScope) {}

  /** A config given with a send, validated and checked before the task exists (a refused one refuses the send). */
  async validate(config: TaskPushNotificationConfig, context: ServerCallContext): Promise<PushConfigInput> {
    const input = pushConfigInputOf(config, wireVersionOf(context.requestedVersion));
    await checkPushUrl((url) => this.scope.checkUrl(url), input.url);
    return input;
  }

  async create(
    params: Params<'createTaskPushNotificationConfig'>,
    context: ServerCallContext,
  ): Promise<TaskPushNotificationConfig> {
    const task = await this.scope.find(params.taskId);
    const input = await this.validate(params, context);
    const existed = (await this.scope.configs.get(task.tenant, task.id, input.id)) !== undefined;
    const stored = await this.scope.configs.put(task, input);
    if (!SETTLED.has(task.state)) {
      try {
        await this.scope.workflows.pushConfigured(task.id);
      } catch (e) {
        // The workflow did not hear of it (Temporal unreachable): a new config would never be pushed to; it is not kept.
        if (!existed) await this.scope.configs.delete(task.tenant, task.id, input.id);
        throw e;
      }
    }
    return toWirePushConfig(stored);
  }

  async get(params: Params<'getTaskPushNotificationConfig'>): Promise<TaskPushNotificationConfig> {
    const task = await this.scope.find(params.taskId);
    const config = params.id ? await this.scope.configs.get(task.tenant, task.id, params.id) : undefined;
    if (!config) throw new TaskNotFoundError(`task ${task.id} has no push notification config ${params.id}`);
    return toWirePushConfig(config);
  }

  async list(params: Params<'listTaskPushNotificationConfigs'>): Promise<ListTaskPushNotificationConfigsResponse> {
    const task = await this.scope.find(params.taskId);
    const size = params.pageSize || MAX_PAGE_SIZE;
    if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE)
      throw new RequestMalformedError(`pageSize: 1 to ${MAX_PAGE_SIZE}`);
    const page = await this.scope.configs.list(task.tenant, task.id, {
      size,
      after: params.pageToken ? decodePageToken(params.pageToken) : undefined,
    });
    const last = page.configs[page.configs.length - 1];
    return {
      configs: page.configs.map(toWirePushConfig),
      nextPageToken: page.more && last ? encodePageToken(last.id) : '',
    };
  }

  async delete(params: Params<'deleteTaskPushNotificationConfig'>): Promise<void> {
    const task = await this.scope.find(params.taskId);
    if (!params.id || !(await this.scope.configs.delete(task.tenant, task.id, params.id))) {
      throw new TaskNotFoundError(`task ${task.id} has no push notification config ${params.id}`);
    }
  }
}

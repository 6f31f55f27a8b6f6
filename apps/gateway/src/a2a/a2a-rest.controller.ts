import { Controller, Delete, Get, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  ListTaskPushNotificationConfigsResponse,
  ListTasksResponse,
  SendMessageRequest,
  SendMessageResponse,
  StreamResponse,
  Task,
  TaskPushNotificationConfig,
  taskStateFromJSON,
  TaskState,
} from '@a2a-js/sdk';
import { RequestMalformedError, restStatusFor, toRestErrorBody, VersionNotSupportedError } from '@a2a-js/sdk/errors';
import { ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { A2ABroker, AgentUnreachable, MeshTaskHandler } from '@libs/a2a';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import type { Caller } from '@libs/security';
import { rawBodyOf } from '../http/body-parsers';
import { headerOf, isUnavailable, meshHandlerOf } from './a2a-endpoint';
import { isRestSend, isRestStream } from './a2a-paths';
import { CallerParam, GateRoute, Gates } from '../http/gate-route';
import { openStream, StreamLease, writeSse } from './a2a-sse';
import { isLegacyRestStream, serveLegacyRest } from './a2a-rest-v03';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';

const A2A_ANSWER = {
  200: { description: 'the answer', schema: z.looseObject({}), contentType: 'application/a2a+json' },
  400: { description: "the binding's error", schema: z.looseObject({}), contentType: 'application/a2a+json' },
};

const log = createLogger('A2ARest');

/** The OpenAPI entry of the v0.3 binding's routes (a2a-rest-v03.ts), by method. */
const LEGACY_ROUTE = (method: 'GET' | 'POST' | 'DELETE') => ({
  summary: {
    GET: 'A2A HTTP+JSON v0.3: `v1/tasks/{id}`, `v1/tasks/{id}:subscribe` (SSE), `v1/tasks/{id}/pushNotificationConfigs[/{configId}]`, `v1/card`',
    POST: 'A2A HTTP+JSON v0.3: `v1/message:send` (201), `v1/message:stream` (SSE), `v1/tasks/{id}:cancel`, `v1/tasks/{id}:subscribe` (SSE), `v1/tasks/{id}/pushNotificationConfigs` (201)',
    DELETE: 'A2A HTTP+JSON v0.3: `v1/tasks/{id}/pushNotificationConfigs/{configId}` (204)',
  }[method],
  tags: ['a2a'],
  params: { name: "the agent's name", '*': 'the v0.3 route after `v1/`' },
  responses: { 200: { description: 'the answer (v0.3 JSON)', schema: z.looseObject({}) }, ...errors(404), ...GATED },
});

/** The A2A content type of the HTTP+JSON binding's answers. */
const A2A_JSON = 'application/a2a+json';

/**
 * An agent's A2A HTTP+JSON (REST) binding on the mesh, v1.0 (docs/a2a.md): `POST {base}/message:send`,
 * `GET {base}/tasks/{id}`, `POST {base}/tasks/{id}:cancel`, `GET {base}/tasks`, the streams
 * `POST {base}/message:stream` and `GET|POST {base}/tasks/{id}:subscribe` (Server-Sent Events, each `data:` a
 * `StreamResponse`, each `id:` the event's seq in the task's log: a2a-sse.ts), and the push notification configs
 * `{base}/tasks/{id}/pushNotificationConfigs[/{configId}]` (POST 201, GET, DELETE 204, as the SDK's REST handler
 * routes them), with `{base}` = `/a2a/agents/{name}/rest`. The same request handler as the JSON-RPC endpoint
 * (MeshTaskHandler); errors in the binding's shape and statuses (the SDK's `toRestErrorBody`). Gate action
 * `publish`, as for the JSON-RPC endpoint.
 */
@Controller('a2a/agents')
export class A2ARestController {
  constructor(
    private readonly broker: A2ABroker,
    private readonly gates: Gates,
  ) {}

  @Get(':name/rest/tasks')
  @ApiRoute({
    summary: 'A2A HTTP+JSON: list tasks',
    tags: ['a2a'],
    params: { name: "the agent's name" },
    responses: { ...A2A_ANSWER, ...errors(404), ...GATED },
  })
  @GateRoute({ action: 'publish' })
  async list(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Query() query: Record<string, string | undefined>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.answer(caller, name, request, reply, async (handler, context) => {
      const result = await handler.listTasks(
        {
          tenant: query.tenant ?? '',
          contextId: query.contextId ?? '',
          status: query.status
            ? taskStateFromJSON(Number.isNaN(Number(query.status)) ? query.status : Number(query.status))
            : TaskState.TASK_STATE_UNSPECIFIED,
          pageSize: integerOf(query.pageSize, 'pageSize'),
          pageToken: query.pageToken ?? '',
          historyLength: integerOf(query.historyLength, 'historyLength'),
          statusTimestampAfter: query.statusTimestampAfter || undefined,
          includeArtifacts: query.includeArtifacts === 'true',
        },
        context,
      );
      // Every field present, empty ones too (as the SDK's own server answers).
      return {
        tasks: [],
        nextPageToken: '',
        pageSize: 0,
        totalSize: 0,
        ...(ListTasksResponse.toJSON(result) as object),
      };
    });
  }

  @Get(':name/rest/tasks/:id/pushNotificationConfigs')
  @ApiRoute({
    summary: "A2A HTTP+JSON: a task's push notification configs",
    tags: ['a2a'],
    params: { name: "the agent's name", id: 'the task id' },
    responses: { ...A2A_ANSWER, ...errors(404), ...GATED },
  })
  @GateRoute({ action: 'publish' })
  async listPushConfigs(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Query() query: Record<string, string | undefined>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.answer(caller, name, request, reply, async (handler, context) => {
      const result = await handler.listTaskPushNotificationConfigs(
        {
          tenant: '',
          taskId: id,
          pageSize: integerOf(query.pageSize, 'pageSize') ?? 0,
          pageToken: query.pageToken ?? '',
        },
        context,
      );
      return { configs: [], nextPageToken: '', ...(ListTaskPushNotificationConfigsResponse.toJSON(result) as object) };
    });
  }

  @Get(':name/rest/tasks/:id/pushNotificationConfigs/:configId')
  @ApiRoute({
    summary: 'A2A HTTP+JSON: one push notification config',
    tags: ['a2a'],
    params: { name: "the agent's name", id: 'the task id', configId: 'the config id' },
    responses: { ...A2A_ANSWER, ...errors(404), ...GATED },
  })
  @GateRoute({ action: 'publish' })
  async getPushConfig(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Param('configId') configId: string,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.answer(caller, name, request, reply, async (handler, context) =>
      TaskPushNotificationConfig.toJSON(
        await handler.getTaskPushNotificationConfig({ tenant: '', taskId: id, id: configId }, context),
      ),
    );
  }

  @Delete(':name/rest/tasks/:id/pushNotificationConfigs/:configId')
  @ApiRoute({
    summary: 'A2A HTTP+JSON: remove a push notification config',
    tags: ['a2a'],
    params: { name: "the agent's name", id: 'the task id', configId: 'the config id' },
    responses: { 204: { description: 'removed' }, ...errors(404), ...GATED },
  })
  @GateRoute({ action: 'publish' })
  async deletePushConfig(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Param('configId') configId: string,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.answer(caller, name, request, reply, async (handler, context) => {
      await handler.deleteTaskPushNotificationConfig({ tenant: '', taskId: id, id: configId }, context);
      return NO_CONTENT;
    });
  }

  @Get(':name/rest/tasks/:id')
  @ApiRoute({
    summary: 'A2A HTTP+JSON: one task (`{id}:subscribe`: its stream, SSE)',
    tags: ['a2a'],
    params: { name: "the agent's name", id: 'the task id' },
    responses: { ...A2A_ANSWER, ...errors(404), ...GATED },
  })
  @GateRoute({ action: 'publish', stream: (r) => r.params?.id?.endsWith(':subscribe') === true })
  async get(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Query('historyLength') historyLength: string | undefined,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    if (id.endsWith(':subscribe')) {
      const taskId = id.slice(0, -':subscribe'.length);
      return this.stream(caller, name, request, reply, (handler, context) =>
        handler.resubscribe({ tenant: '', id: taskId }, context),
      );
    }
    await this.answer(caller, name, request, reply, async (handler, context) => {
      return Task.toJSON(
        await handler.getTask({ tenant: '', id, historyLength: integerOf(historyLength, 'historyLength') }, context),
      );
    });
  }

  @Get(':name/rest/v1/*')
  @ApiRoute(LEGACY_ROUTE('GET'))
  @GateRoute({ action: 'publish', stream: (r) => isLegacyRestStream(r.params?.['*'] ?? '') })
  async legacyGet(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.legacy(caller, name, request, reply);
  }

  @Post(':name/rest/v1/*')
  @ApiRoute({ ...LEGACY_ROUTE('POST'), body: { schema: z.looseObject({}), required: false } })
  @GateRoute({
    action: 'publish',
    stream: (r) => isLegacyRestStream(r.params?.['*'] ?? ''),
    publishes: (r) => isRestSend(r.params?.['*'] ?? ''),
  })
  async legacyPost(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.legacy(caller, name, request, reply);
  }

  /** The v0.3 REST binding of agent `name` (a2a-rest-v03.ts), whichever the method. */
  private async legacy(caller: Caller, name: string, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const handler = await meshHandlerOf(this.broker, this.gates, caller, name, request);
    await serveLegacyRest(handler, caller, this.broker.streams, request, reply);
  }

  @Delete(':name/rest/v1/*')
  @ApiRoute(LEGACY_ROUTE('DELETE'))
  @GateRoute({ action: 'publish' })
  async legacyDelete(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.legacy(caller, name, request, reply);
  }

  /** The binding's POST routes: `message:send`, `tasks/{id}:cancel` (and the unsupported ones). */
  @Post(':name/rest/*')
  @ApiRoute({
    summary:
      'A2A HTTP+JSON: `message:send`, `tasks/{id}:cancel`, `tasks/{id}/pushNotificationConfigs` (201); the streams `message:stream`, `tasks/{id}:subscribe` (SSE)',
    tags: ['a2a'],
    params: {
      name: "the agent's name",
      '*': '`message:send`, `tasks/{id}:cancel`, `tasks/{id}/pushNotificationConfigs`, `message:stream` or `tasks/{id}:subscribe`',
    },
    body: { schema: z.looseObject({}), required: false },
    responses: { ...A2A_ANSWER, ...errors(404), ...GATED },
  })
  @GateRoute({
    action: 'publish',
    stream: (r) => isRestStream(r.params?.['*'] ?? ''),
    publishes: (r) => isRestSend(r.params?.['*'] ?? ''),
  })
  async post(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const rest = (request.params as Record<string, string>)['*'] ?? '';
    if (rest === 'message:stream') {
      return this.stream(caller, name, request, reply, (handler, context) =>
        handler.sendMessageStream(SendMessageRequest.fromJSON(bodyOf(request)), context),
      );
    }
    const subscribe = /^tasks\/([^/]+):subscribe$/.exec(rest);
    if (subscribe)
      return this.stream(caller, name, request, reply, (handler, context) =>
        handler.resubscribe({ tenant: '', id: decodeURIComponent(subscribe[1]) }, context),
      );
    await this.answer(caller, name, request, reply, async (handler, context) => {
      if (rest === 'message:send') {
        const body = bodyOf(request);
        const result = await handler.sendMessage(SendMessageRequest.fromJSON(body), context);
        return SendMessageResponse.toJSON({
          payload: 'messageId' in result ? { $case: 'message', value: result } : { $case: 'task', value: result },
        });
      }
      const cancel = /^tasks\/([^/]+):cancel$/.exec(rest);
      if (cancel)
        return Task.toJSON(
          await handler.cancelTask({ tenant: '', id: decodeURIComponent(cancel[1]), metadata: undefined }, context),
        );
      const pushConfigs = /^tasks\/([^/]+)\/pushNotificationConfigs$/.exec(rest);
      if (pushConfigs) {
        const params = TaskPushNotificationConfig.fromJSON({
          ...(bodyOf(request) as object),
          taskId: decodeURIComponent(pushConfigs[1]),
        });
        return created(
          TaskPushNotificationConfig.toJSON(await handler.createTaskPushNotificationConfig(params, context)),
        );
      }
      throw new EventMeshError(ErrorCode.NotFound, `no A2A route POST ${rest}`);
    });
  }

  /** Runs one call: the version check, the work, the answer in the binding's shape (or the runtime's, see below). */
  private async answer(
    caller: Caller,
    name: string,
    request: FastifyRequest,
    reply: FastifyReply,
    work: (handler: MeshTaskHandler, context: ServerCallContext) => Promise<unknown>,
  ): Promise<void> {
    const handler = await meshHandlerOf(this.broker, this.gates, caller, name, request);
    const version = headerOf(request, 'a2a-version') ?? '0.3';
    const context = new ServerCallContext({
      requestedVersion: version,
      user: { isAuthenticated: caller.via !== 'none', userName: caller.principal },
    });
    try {
      await checkVersion(handler, version);
      const body = await work(handler, context);
      if (body === NO_CONTENT) await reply.status(204).send();
      else if (body instanceof Created) await reply.status(201).header('content-type', A2A_JSON).send(body.body);
      else await reply.status(200).header('content-type', A2A_JSON).send(body);
    } catch (e) {
      await refuse(handler, reply, e);
    }
  }

  /**
   * Runs one streaming call: the version check, a stream slot (503 past EVENTMESH_AGENTS_MAX_STREAMS), the first
   * event (an error before it is answered in the binding's shape, as any call's), then the stream as SSE.
   */
  private async stream(
    caller: Caller,
    name: string,
    request: FastifyRequest,
    reply: FastifyReply,
    open: (handler: MeshTaskHandler, context: ServerCallContext) => AsyncGenerator<StreamResponse, void, undefined>,
  ): Promise<void> {
    const handler = await meshHandlerOf(this.broker, this.gates, caller, name, request);
    const version = headerOf(request, 'a2a-version') ?? '0.3';
    const context = new ServerCallContext({
      requestedVersion: version,
      user: { isAuthenticated: caller.via !== 'none', userName: caller.principal },
    });
    let lease: StreamLease | undefined;
    try {
      await checkVersion(handler, version);
      lease = openStream(this.broker.streams, context, headerOf(request, 'last-event-id'));
      const events = open(handler, context);
      const first = await events.next();
      const taken = lease;
      lease = undefined;
      await writeSse(
        reply,
        {
          first,
          rest: events,
          context,
          dataOf: (event) => StreamResponse.toJSON(event as StreamResponse),
          errorOf: (e) =>
            handler.unexpected !== undefined
              ? toRestErrorBody(new Error('internal error'), 500)
              : toRestErrorBody(e, restStatusFor(e)),
        },
        taken,
        this.broker.streamHeartbeatMs,
      );
    } catch (e) {
      lease?.release();
      await refuse(handler, reply, e);
    }
  }
}

/**
 * Answers a call that failed in the binding's shape, unless it failed for a reason of the runtime's: a route error
 * (EventMeshError) and Postgres unavailable go to the error filter (503); a bug is a 500 without detail.
 */
async function refuse(handler: MeshTaskHandler, reply: FastifyReply, e: unknown): Promise<void> {
  if (e instanceof EventMeshError) throw e;
  const unexpected = handler.unexpected;
  if (unexpected !== undefined && isUnavailable(unexpected)) throw unexpected;
  if (unexpected !== undefined && !(unexpected instanceof AgentUnreachable)) {
    log.error({ err: unexpected }, 'A2A call failed');
    throw new EventMeshError(ErrorCode.Internal, 'internal error');
  }
  const status = restStatusFor(e);
  await reply.status(status).header('content-type', A2A_JSON).send(toRestErrorBody(e, status));
}

/**
 * The version check of the v1.0 routes: one the card names, and not v0.3, whose routes are under `{base}/v1/`
 * (a2a-rest-v03.ts; the card names v0.3 for them).
 */
async function checkVersion(handler: MeshTaskHandler, version: string): Promise<void> {
  if (/^0\./.test(version))
    throw new VersionNotSupportedError(
      `A2A-Version ${version}: this is the v1.0 HTTP+JSON binding (send A2A-Version: 1.0); v0.3's routes are under v1/`,
    );
  validateVersion(version, await handler.getAgentCard(), 'HTTP+JSON');
}

/** What a route answers 204 (no body) with. */
const NO_CONTENT = Symbol('no content');

/** What a route answers 201 with (a created config). */
class Created {
  constructor(readonly body: unknown) {}
}
const created = (body: unknown) => new Created(body);

/** The request's JSON body (the route parses it: a2a-paths.ts), or the binding's 400. */
function bodyOf(request: FastifyRequest): unknown {
  const raw = rawBodyOf(request) ?? (Buffer.isBuffer(request.body) ? request.body : undefined);
  if (!raw || raw.length === 0) throw new RequestMalformedError('a JSON body is required');
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch (e) {
    throw new RequestMalformedError(`the body is not JSON: ${(e as Error).message}`);
  }
}

function integerOf(value: string | undefined, field: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (!/^-?\d+$/.test(value)) throw new RequestMalformedError(`${field}: an integer`);
  return Number(value);
}

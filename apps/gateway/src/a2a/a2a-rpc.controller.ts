import { Controller, Param, Post, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { A2A_ERROR_CODE, VersionNotSupportedError } from '@a2a-js/sdk/errors';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { A2ABroker, AgentUnreachable, MeshTaskHandler } from '@libs/a2a';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import type { Caller } from '@libs/security';
import { headerOf, isUnavailable, meshHandlerOf } from './a2a-endpoint';
import { meshRouteOf, SKILL_ID_METADATA } from './a2a-mesh-routing';
import { callsRpcSend, callsRpcStream, RPC_STREAM_METHODS } from './a2a-paths';
import { rpcVersionOf } from './a2a-rpc-version';
import { rawBodyOf } from '../http/body-parsers';
import { CallerParam, GateRoute, Gates } from '../http/gate-route';
import { openStream, SseEvents, StreamLease, writeSse, writeSseError } from './a2a-sse';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { jsonRpcAnswerSchema } from '../http/api-schemas';

type RpcId = string | number | null;
interface RpcAnswer {
  jsonrpc: string;
  id: RpcId;
  result?: unknown;
  error?: unknown;
}

const log = createLogger('A2ARpc');

/** A streaming call refused before its first event: the error, and whether it is written as a stream. */
interface RpcStreamRefused {
  refused: RpcAnswer;
  asStream: boolean;
}

/** A streaming call whose first event is read: the route writes it as SSE. */
interface RpcStream {
  stream: SseEvents;
  lease: StreamLease;
}

/** The subscribe methods, v1.0's and v0.3's (each answers to its version's names only). */
const SUBSCRIBE_METHODS = new Set(['SubscribeToTask', 'tasks/resubscribe']);

/** The version served by the SDK's v0.3 handler (`LegacyJsonRpcTransportHandler`). */
const LEGACY_VERSION = '0.3';

/**
 * An agent's A2A JSON-RPC endpoint on the mesh (docs/a2a.md): the SDK's transport handlers (v1.0 names, or v0.3
 * names when `A2A-Version` asks for 0.3 or, absent, the method is not a v1.0 name: a2a-rpc-version.ts) in front of the mesh's request handler (libs/a2a, MeshTaskHandler). The
 * route parses its own body so that JSON-RPC's envelope errors are JSON-RPC's: -32700 (not JSON), -32600 (not a
 * request); the SDK answers -32601 (unknown method), -32602 (bad params) and the A2A codes. Every JSON-RPC answer
 * is HTTP 200; an agent the tenant has not registered is a 404 `AGENT_NOT_FOUND`. The streaming methods answer
 * Server-Sent Events (a2a-sse.ts), each `data:` a JSON-RPC answer, each `id:` the event's seq in the task's log.
 * A streaming call the handler refuses before its first event (an unknown task, a terminal one) is a plain JSON-RPC
 * answer (the v1.0 clients read its typed error), but for a subscribe (v1.0 `SubscribeToTask`, v0.3
 * `tasks/resubscribe`), answered as a stream of that one `event: error`, as the official Python SDK's server answers
 * it (and the JS SDK's for v0.3): the Python SDK's v0.3 client and the A2A TCK read nothing but a stream, and the
 * v1.0 clients of both SDKs read the error from it.
 *
 * The mesh's own endpoint (`POST /a2a/rpc`, the interface of the mesh's card at the host root) is the same, for the
 * agent a request names (a2a-mesh-routing.ts): a message's skill (`metadata.skillId`, an agent's name) or its task's.
 *
 * Gate action `publish`: the caller sends work to an agent (and reads and cancels what it sent).
 */
@Controller()
export class A2ARpcController {
  constructor(
    private readonly broker: A2ABroker,
    private readonly gates: Gates,
  ) {}

  @Post('a2a/agents/:name/rpc')
  @ApiRoute({
    summary: "The agent's A2A JSON-RPC endpoint (v1.0, or v0.3 by `A2A-Version`)",
    tags: ['a2a'],
    params: { name: "the agent's name" },
    body: {
      schema: z.looseObject({ jsonrpc: z.literal('2.0'), method: z.string() }),
      description: 'a JSON-RPC 2.0 request',
    },
    responses: {
      200: {
        description:
          'the JSON-RPC answer (a protocol error too); the streaming methods (SendStreamingMessage, SubscribeToTask, message/stream, tasks/resubscribe) answer `text/event-stream`, each event `id: <seq>` and a JSON-RPC answer',
        schema: jsonRpcAnswerSchema,
      },
      ...errors(404),
      ...GATED,
    },
  })
  @GateRoute({ action: 'publish', stream: callsRpcStream, publishes: callsRpcSend })
  async rpc(
    @CallerParam() caller: Caller,
    @Param('name') name: string,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.serve(caller, name, request, reply);
  }

  @Post('a2a/rpc')
  @ApiRoute({
    summary: `The mesh's own A2A JSON-RPC endpoint (its card's interface): a message is routed to the agent named by its \`metadata.${SKILL_ID_METADATA}\``,
    tags: ['a2a'],
    body: {
      schema: z.looseObject({ jsonrpc: z.literal('2.0'), method: z.string() }),
      description: `a JSON-RPC 2.0 request: a message with \`metadata.${SKILL_ID_METADATA}\` (a skill of the mesh's card: an agent's name) or continuing a task, or a call naming a task`,
    },
    responses: {
      200: {
        description:
          "the agent's JSON-RPC answer, as its own endpoint's (a call naming no skill and no task: the tenant's only agent's); -32602 for a message whose skill no single agent has (or naming none, when the tenant has several agents), -32001 for an unknown task, -32004 for ListTasks and the extended card of a tenant with several agents (each agent's own endpoint serves them)",
        schema: jsonRpcAnswerSchema,
      },
      ...GATED,
    },
  })
  @GateRoute({ action: 'publish', stream: callsRpcStream, publishes: callsRpcSend })
  async meshRpc(
    @CallerParam() caller: Caller,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const parsed = parseRpc(request);
    const name = 'answer' in parsed ? parsed.answer : await this.agentOf(caller.tenant, parsed.rpc);
    if (typeof name === 'string') return this.serve(caller, name, request, reply);
    if ('rpc' in parsed && SUBSCRIBE_METHODS.has(parsed.rpc.method)) return writeSseError(reply, name);
    await reply.status(200).header('content-type', 'application/json').send(name);
  }

  /** The agent a call to the mesh's own endpoint is for (a2a-mesh-routing.ts), or the JSON-RPC error refusing it. */
  private async agentOf(tenant: string, rpc: JsonRpcRequest): Promise<string | RpcAnswer> {
    const id = rpc.id ?? null;
    const route = meshRouteOf(rpc.method, rpc.params);
    if ('refused' in route) return failure(id, route.refused.code, route.refused.message);
    if ('task' in route) {
      const task = await this.broker.tasks.get(tenant, route.task);
      return task?.agent ?? failure(id, A2A_ERROR_CODE.TASK_NOT_FOUND, `no task ${route.task}`);
    }
    if ('unnamed' in route) {
      const agents = await this.broker.list(tenant, {});
      return agents.length === 1 ? agents[0].name : failure(id, route.unnamed.code, route.unnamed.message);
    }
    try {
      return (await this.broker.agent(tenant, route.skill)).name;
    } catch (e) {
      if (!(e instanceof EventMeshError && e.code === ErrorCode.AgentNotFound)) throw e;
    }
    // Not an agent's name: the one agent whose own card has the skill.
    const owners = await this.broker.list(tenant, { skill: route.skill });
    if (owners.length === 1) return owners[0].name;
    return failure(
      id,
      A2A_ERROR_CODE.INVALID_PARAMS,
      `Invalid params: ${owners.length === 0 ? 'no agent' : 'more than one agent'} of the mesh's card has the skill ${route.skill}`,
    );
  }

  private async serve(caller: Caller, name: string, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const handler = await meshHandlerOf(this.broker, this.gates, caller, name, request);
    const answer = await this.answer(caller, handler, request);
    if ('lease' in answer) return writeSse(reply, answer.stream, answer.lease, this.broker.streamHeartbeatMs);
    if ('refused' in answer) {
      if (answer.asStream) return writeSseError(reply, answer.refused);
      return void (await reply.status(200).header('content-type', 'application/json').send(answer.refused));
    }
    await reply.status(200).header('content-type', 'application/json').send(answer);
  }

  private async answer(
    caller: Caller,
    handler: MeshTaskHandler,
    request: FastifyRequest,
  ): Promise<RpcAnswer | RpcStream | RpcStreamRefused> {
    const parsed = parseRpc(request);
    if ('answer' in parsed) return parsed.answer;
    const { body, rpc } = parsed;
    const id = rpc.id ?? null;
    const version = rpcVersionOf(headerOf(request, 'a2a-version'), rpc.method);
    const legacy = version === LEGACY_VERSION;
    const context = new ServerCallContext({
      requestedVersion: version,
      user: { isAuthenticated: caller.via !== 'none', userName: caller.principal },
    });
    try {
      validateVersion(version, await handler.getAgentCard(), 'JSONRPC');
    } catch (e) {
      const mapped =
        e instanceof VersionNotSupportedError
          ? JsonRpcTransportHandler.mapToJSONRPCError(e)
          : { code: A2A_ERROR_CODE.INTERNAL_ERROR, message: 'internal error' };
      return { jsonrpc: '2.0', id, error: mapped };
    }
    let lease: StreamLease | undefined = RPC_STREAM_METHODS.has(rpc.method)
      ? openStream(this.broker.streams, context, headerOf(request, 'last-event-id'))
      : undefined;
    try {
      const answered = legacy
        ? await new LegacyJsonRpcTransportHandler(handler).handle(body as Record<string, unknown>, context)
        : await new JsonRpcTransportHandler(handler).handle(body as Record<string, unknown>, context);
      if (!isStream(answered) || !lease) return answerFor(handler, answered as RpcAnswer);
      const mapError = (e: unknown) =>
        legacy
          ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError(e)
          : JsonRpcTransportHandler.mapToJSONRPCError(e);
      let first: IteratorResult<unknown, void>;
      try {
        first = await answered.next();
      } catch (e) {
        // Refused before the first event (an unknown task, a terminal one, a bad Last-Event-ID...).
        const refused = answerFor(handler, { jsonrpc: '2.0', id, error: mapError(e) });
        return { refused, asStream: SUBSCRIBE_METHODS.has(rpc.method) };
      }
      const stream: SseEvents = {
        first,
        rest: answered,
        context,
        dataOf: (event) => event,
        errorOf: (e) =>
          handler.unexpected !== undefined
            ? failure(id, A2A_ERROR_CODE.INTERNAL_ERROR, 'internal error')
            : { jsonrpc: '2.0', id, error: mapError(e) },
      };
      const taken = { stream, lease };
      lease = undefined;
      return taken;
    } finally {
      // Released here unless the stream took it (writeSse releases it when the stream ends).
      lease?.release();
    }
  }
}

/**
 * The answer, unless the call failed for a reason of the runtime's: Postgres or Kafka unavailable, or a bound
 * reached, is thrown to the error filter (503 with Retry-After, as on every route); any other error that is not the protocol's is logged and
 * answered -32603 without its detail (an agent that did not answer keeps its message).
 */
function answerFor(handler: MeshTaskHandler, answer: RpcAnswer): RpcAnswer {
  const e = handler.unexpected;
  if (e === undefined) return answer;
  if (isUnavailable(e)) throw e;
  if (e instanceof AgentUnreachable) return answer;
  log.error({ err: e }, 'A2A call failed');
  return failure(answer.id, A2A_ERROR_CODE.INTERNAL_ERROR, 'internal error');
}

interface JsonRpcRequest {
  id?: RpcId;
  method: string;
  params?: unknown;
}

/** The request's body as a JSON-RPC request, or the JSON-RPC error answering it: -32700 (not JSON), -32600. */
function parseRpc(request: FastifyRequest): { body: unknown; rpc: JsonRpcRequest } | { answer: RpcAnswer } {
  const raw = rawBodyOf(request) ?? (Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0));
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    return { answer: failure(null, A2A_ERROR_CODE.PARSE_ERROR, `Parse error: ${(e as Error).message}`) };
  }
  const envelope = envelopeError(body);
  return envelope ? { answer: envelope } : { body, rpc: body as JsonRpcRequest };
}

function failure(id: RpcId, code: number, message: string): RpcAnswer {
  return { jsonrpc: '2.0', id, error: { code, message } };
}

/** JSON-RPC 2.0's checks of a request object: -32600 when it is not one (batches are not supported). */
function envelopeError(body: unknown): RpcAnswer | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return failure(
      null,
      A2A_ERROR_CODE.INVALID_REQUEST,
      'Invalid Request: a JSON-RPC request object is required (batches are not supported)',
    );
  const rpc = body as Record<string, unknown>;
  const idOk =
    !('id' in rpc) ||
    rpc.id === null ||
    typeof rpc.id === 'string' ||
    (typeof rpc.id === 'number' && Number.isInteger(rpc.id));
  const id = idOk ? ((rpc.id as RpcId | undefined) ?? null) : null;
  if (rpc.jsonrpc !== '2.0')
    return failure(id, A2A_ERROR_CODE.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"');
  if (!idOk)
    return failure(null, A2A_ERROR_CODE.INVALID_REQUEST, 'Invalid Request: id must be a string, an integer or null');
  if (typeof rpc.method !== 'string' || rpc.method === '')
    return failure(id, A2A_ERROR_CODE.INVALID_REQUEST, 'Invalid Request: method must be a non-empty string');
  return undefined;
}

function isStream(value: unknown): value is AsyncGenerator<unknown, void, undefined> {
  return typeof (value as { [Symbol.asyncIterator]?: unknown })?.[Symbol.asyncIterator] === 'function';
}

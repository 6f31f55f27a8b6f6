import { legacyRestRouter } from '@a2a-js/sdk/compat/v0_3/server/express';
import { A2AError } from '@a2a-js/sdk/errors';
import { ServerCallContext } from '@a2a-js/sdk/server';
import express from 'express';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AgentUnreachable, STREAM_STATE, streamSeqOf, TaskStreams, type MeshTaskHandler } from '@libs/a2a';
import { createLogger } from '@libs/logging';
import type { Caller } from '@libs/security';
import { rawBodyOf } from '../http/body-parsers';
import { streamSlot } from './a2a-sse';
import { headerOf, isUnavailable } from './a2a-endpoint';
import { toHttpError } from '../http/http-error';

/**
 * The handler as the SDK's router gets it: a failure of the runtime's own (Postgres, a bug) reaches the client as
 * `internal error`, logged here with its detail; the router would put its message in the answer. The protocol's
 * errors, and an agent that cannot be reached, go through as they are. An outage (Postgres or Kafka unavailable, a
 * bound on held work reached: `isUnavailable`) is handed to `unavailable` first, so the answer can say 503 (see
 * {@link serveLegacyRest}).
 */
export function withoutInternalDetail(
  handler: MeshTaskHandler,
  unavailable: (e: unknown) => void = () => undefined,
): MeshTaskHandler {
  const hide = (e: unknown): never => {
    if (e instanceof A2AError || e instanceof AgentUnreachable) throw e;
    if (isUnavailable(e)) {
      log.warn({ error: (e as Error).message }, 'A2A v0.3 REST call: a dependency is unavailable');
      unavailable(e);
    } else log.error({ err: e }, 'A2A v0.3 REST call failed');
    throw new Error('internal error');
  };
  async function* guarded(events: AsyncGenerator<unknown>): AsyncGenerator<unknown> {
    try {
      yield* events;
    } catch (e) {
      hide(e);
    }
  }
  return new Proxy(handler, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (result instanceof Promise) return result.catch(hide);
        if (result && typeof (result as AsyncGenerator)[Symbol.asyncIterator] === 'function')
          return guarded(result as AsyncGenerator);
        return result;
      };
    },
  });
}

/** The v0.3 binding's routes answered with a stream (Server-Sent Events), after `{base}/v1/`. */
export function isLegacyRestStream(rest: string): boolean {
  return rest === 'message:stream' || /^tasks\/[^/]+:subscribe$/.test(rest);
}

const log = createLogger('A2ARest');

/** What one request hands the Express app: the SDK's router for its agent and caller, and its parsed body. */
interface LegacyCall extends IncomingMessage {
  legacyRouter?: express.RequestHandler;
  body?: unknown;
  _body?: boolean;
}

/**
 * Runs the SDK's v0.3 router for the agent of the request. Mounted at every agent's REST base: the router sees
 * `/v1/...`. What it does not route (an unknown path, a request whose `A2A-Version` is not 0.3) is 404 in the v0.3
 * binding's error shape.
 */
const app = express();
app.disable('x-powered-by');
app.use('/a2a/agents/:name/rest', (req, res, next) => (req as unknown as LegacyCall).legacyRouter!(req, res, next));
app.use((req, res) => {
  res.status(404).json({ code: -32601, message: `no A2A v0.3 HTTP+JSON route ${req.method} ${req.path}` });
});

/**
 * An agent's A2A HTTP+JSON binding in its v0.3 form, at `{base}/v1/...` with `{base}` = `/a2a/agents/{name}/rest`:
 * `POST /v1/message:send`, `POST /v1/message:stream`, `GET /v1/tasks/{id}`, `POST /v1/tasks/{id}:cancel`,
 * `GET|POST /v1/tasks/{id}:subscribe`, `POST|GET /v1/tasks/{id}/pushNotificationConfigs`,
 * `GET|DELETE /v1/tasks/{id}/pushNotificationConfigs/{configId}` and `GET /v1/card`.
 *
 * Served by the SDK's own v0.3 router (`legacyRestRouter` of `@a2a-js/sdk/compat/v0_3/server/express`): the v0.3
 * binding is the JSON form of v0.3's protocol buffers, and the SDK keeps its codecs for it inside that router (an
 * Express router; nothing else of the SDK exports them). It runs on the request handler every binding of the
 * agent uses (MeshTaskHandler), after the request gate, on the request's own socket (the reply is hijacked). Its
 * streams take a slot of EVENTMESH_AGENTS_MAX_STREAMS like the other bindings' and end when the client goes away;
 * each event gets the `id: <seq>` of the other bindings (the SDK's v0.3 stream writer writes none: added here), and
 * `Last-Event-ID` resumes a `:subscribe` after it, nothing lost or repeated. An outage before the answer began (a stream's
 * before its first event) is 503 with `Retry-After`; one in a stream ends it with the SDK's error event.
 */
export async function serveLegacyRest(
  handler: MeshTaskHandler,
  caller: Caller,
  streams: TaskStreams,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  const rest = (request.params as Record<string, string>)['*'] ?? '';
  const lease = isLegacyRestStream(rest) ? streamSlot(streams) : undefined;
  const user = { isAuthenticated: caller.via !== 'none', userName: caller.principal };
  const call = request.raw as LegacyCall;
  // The route read the body (a2a-paths.ts): handed over parsed, as Express's JSON parser would have left it.
  const raw = rawBodyOf(request);
  if (raw && raw.length > 0) {
    try {
      call.body = JSON.parse(raw.toString('utf8'));
    } catch {
      lease?.release();
      await reply
        .status(400)
        .header('content-type', 'application/json')
        .send({ code: -32700, message: 'Invalid JSON payload.' });
      return;
    }
  }
  call._body = true;
  // An outage answered by the router as its internal error (500) is answered 503 with Retry-After instead, as on
  // every other route, in v0.3's error shape with the runtime's code in `data`: the client learns it may retry.
  let outage: unknown;
  let streamContext: ServerCallContext | undefined;
  const response: ServerResponse = reply.raw;
  Object.defineProperty(response, 'json', {
    configurable: true,
    value(this: express.Response, body: unknown) {
      const json = (Object.getPrototypeOf(this) as express.Response).json;
      if (outage === undefined || this.statusCode !== 500) return json.call(this, body);
      const { status, body: runtime, headers } = toHttpError(outage);
      this.status(status);
      for (const [name, value] of Object.entries(headers ?? {})) this.setHeader(name, value);
      const { code, message, ...data } = runtime;
      return json.call(this, { code: -32603, message, data: { code, ...data } });
    },
  });
  call.legacyRouter = legacyRestRouter({
    requestHandler: withoutInternalDetail(handler, (e) => (outage = e)),
    userBuilder: async () => user,
    contextBuilder: ({ requestedVersion, extensions }) => {
      const context = new ServerCallContext({ requestedVersion, requestedExtensions: extensions, user });
      if (lease) {
        context.state.set(STREAM_STATE.signal, lease.signal);
        const lastEventId = headerOf(request, 'last-event-id');
        if (lastEventId !== undefined) context.state.set(STREAM_STATE.lastEventId, lastEventId);
        streamContext = context;
      }
      return context;
    },
  });
  if (lease) {
    // Each event the SDK's stream writer writes (`data: ...`, no id) gets the seq of the event the handler yielded
    // last, as on the other bindings: the handler tells it before it yields, and the writer writes an event before
    // it asks for the next, so the two are the same event. A client resumes with `Last-Event-ID`.
    const write = response.write.bind(response) as (chunk: unknown, ...rest: unknown[]) => boolean;
    response.write = ((chunk: unknown, ...rest: unknown[]) => {
      const seq = streamContext && streamSeqOf(streamContext);
      const event = typeof chunk === 'string' && chunk.startsWith('data: ') && seq !== undefined;
      return write(event ? `id: ${seq}\n${chunk as string}` : chunk, ...rest);
    }) as ServerResponse['write'];
  }
  reply.hijack();
  await new Promise<void>((resolve) => {
    response.once('close', () => {
      lease?.abort();
      lease?.release();
      resolve();
    });
    app(call as express.Request, response as express.Response);
  });
}

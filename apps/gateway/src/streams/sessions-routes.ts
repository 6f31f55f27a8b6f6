import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { gateHeadersOf, type Admission } from '@libs/security';
import { SESSIONS_LINK_PATH, SessionServer } from '@libs/sessions';
import type { ClusterCredential } from '@libs/streams';
import { apiRouteConfig, errors, GATED } from '../http/api-route';
import { registerClusterSocket } from './cluster-channel-route';
import { Gates, gateRequestOf, type GateRouteSpec } from '../http/gate-route';
import { replyError } from '../http/http-error';

const SESSIONS_ROUTE = 'GET /sessions/ws';
/**
 * The handshake authenticates the caller and holds one stream connection of its tenant's quota; the ACL decides each
 * operation on the connection on its own name (serve, call, publish, subscribe), not the connection.
 */
const SESSIONS_GATE = { action: 'agent.call', connection: true, stream: true } as const;
const admissions = new WeakMap<object, Admission>();

/**
 * The ingress gate's admission of a sessions request (`spec` says how the gate treats its route), or, when the gate
 * refuses it or cannot decide, the error answered on `reply` and undefined.
 */
async function admitted(
  gates: Gates,
  spec: Exclude<GateRouteSpec, { public: true }>,
  route: string,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<Admission | undefined> {
  try {
    return await gates.ingress.admit(
      gateRequestOf(gates, spec, { route, headers: gateHeadersOf(request.raw), remoteAddress: request.ip }),
    );
  } catch (e) {
    // Not awaited: a Fastify reply is a thenable that settles when the answer is written out.
    void replyError(reply, e);
    return undefined;
  }
}

/**
 * Streaming sessions' routes (docs/streaming-sessions.md), the server side being libs/sessions: `GET /sessions/ws`,
 * the client's WebSocket (binary session frames, every session and served agent of the client multiplexed over it),
 * and `GET /internal/sessions/link`, the link between gateway processes (a cluster token, no tenant).
 */
export function registerSessions(
  app: NestFastifyApplication,
  deps: { server: SessionServer; gates: Gates; holder: string; credential: ClusterCredential },
): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.get(
    '/sessions/ws',
    {
      websocket: true,
      config: apiRouteConfig(
        {
          summary:
            'Streaming sessions: a WebSocket of binary session frames (open, request, chunk, end, error, cancel, credit, close; serve; Mode 2 publish and subscribe), docs/streaming-sessions.md',
          tags: ['sessions'],
          responses: { 101: { description: 'switched to the WebSocket protocol' }, ...errors(426), ...GATED },
        },
        SESSIONS_GATE,
      ),
      preValidation: async (request: FastifyRequest, reply: FastifyReply) => {
        // A plain GET is no handshake (see websocket-streams.ts): refused before the gate, holding nothing.
        if ((request.raw as { upgrade?: boolean }).upgrade !== true) {
          const refusal = new EventMeshError(
            ErrorCode.UpgradeRequired,
            'this route is a WebSocket: connect with Upgrade: websocket',
            { upgrade: 'websocket' },
          );
          return replyError(reply, refusal, { upgrade: 'websocket', connection: 'Upgrade' });
        }
        const admission = await admitted(deps.gates, SESSIONS_GATE, SESSIONS_ROUTE, request, reply);
        if (!admission) return reply;
        admissions.set(request, admission);
        request.raw.socket.once('close', admission.release);
      },
    },
    (socket: WebSocket, request: FastifyRequest) => {
      const admission = admissions.get(request)!;
      deps.server.attachClient(
        socket,
        { caller: admission.caller, headers: gateHeadersOf(request.raw), remoteAddress: request.ip },
        admission.release,
      );
    },
  );
  registerSseFallback(app, deps);
  registerClusterSocket(
    app,
    SESSIONS_LINK_PATH,
    'The internal sessions link between gateway processes (a WebSocket; a cluster token of this runtime, no tenant)',
    deps,
    (socket, peer) => deps.server.attachLink(socket, peer),
  );
}

/**
 * One Server-Sent Event of `GET /sessions/sse`, as a client's parser sees it (OpenAPI 3.1 has the schema of
 * `text/event-stream` describe each event): first `connection` (`{ "connection": <token> }`), then `frame`s.
 */
const sessionSseEventSchema = z
  .object({
    event: z.enum(['connection', 'frame']),
    data: z.string().describe('`connection`: `{ "connection": <token> }` as JSON; `frame`: the frame in base64'),
  })
  .strict();

const SSE_ROUTE = 'GET /sessions/sse';
const POST_ROUTE = 'POST /sessions/sse/frames';
/** A client's posts authenticate as it (the same caller as its stream's, else 404); they hold no stream connection. */
const POST_GATE = { action: 'agent.call', connection: true } as const;

/**
 * The fallback where a WebSocket does not get through a proxy: `GET /sessions/sse` streams the frames to the client
 * (Server-Sent Events, each frame in base64; the first event names the connection), and the client posts its own
 * frames to `POST /sessions/sse/frames?connection=<token>` (`application/octet-stream`: each frame after its length,
 * a big-endian u32), on any instance: one that does not hold the stream hands them to the one that does.
 */
function registerSseFallback(app: NestFastifyApplication, deps: { server: SessionServer; gates: Gates }): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.get(
    '/sessions/sse',
    {
      config: apiRouteConfig(
        {
          summary:
            'Streaming sessions over Server-Sent Events (the fallback): `connection` first, then a `frame` event per frame (base64)',
          tags: ['sessions'],
          responses: {
            200: {
              description: 'the event stream, open as long as the client stays',
              contentType: 'text/event-stream',
              schema: sessionSseEventSchema,
            },
            ...GATED,
          },
        },
        SESSIONS_GATE,
      ),
    },
    async (request: FastifyRequest, reply: FastifyReply) => {
      const admission = await admitted(deps.gates, SESSIONS_GATE, SSE_ROUTE, request, reply);
      if (!admission) return reply;
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      request.raw.once('close', admission.release);
      deps.server.attachSse(
        raw,
        { caller: admission.caller, headers: gateHeadersOf(request.raw), remoteAddress: request.ip },
        admission.release,
      );
    },
  );
  fastify.post<{ Querystring: { connection?: string } }>(
    '/sessions/sse/frames',
    {
      config: apiRouteConfig(
        {
          summary: "A client's frames for its SSE sessions connection (each after its length, a u32), on any instance",
          tags: ['sessions'],
          query: z.object({ connection: z.string().describe('the token the stream named its connection by') }),
          body: {
            schema: z.string(),
            contentTypes: ['application/octet-stream'],
            description: 'frames, each after its length',
          },
          responses: {
            202: { description: 'taken (or handed to the instance holding the stream)' },
            ...errors(404),
            ...GATED,
          },
        },
        POST_GATE,
      ),
    },
    async (request, reply) => {
      const admission = await admitted(deps.gates, POST_GATE, POST_ROUTE, request, reply);
      if (!admission) return reply;
      try {
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        if (!(await deps.server.post(String(request.query.connection ?? ''), admission.caller, body)))
          throw new EventMeshError(ErrorCode.NotFound, "no such sessions connection (closed, or another caller's)");
        return reply.code(202).send();
      } catch (e) {
        return replyError(reply, e);
      }
    },
  );
}

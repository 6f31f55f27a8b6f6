import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { ErrorCode, EventMeshError } from '../../../libs/errors';
import { gateHeadersOf, type Admission } from '../../../libs/security';
import { SESSIONS_LINK_PATH, SessionServer } from '../../../libs/sessions';
import type { ClusterCredential } from '../../../libs/streams';
import { apiRouteConfig, errors, GATED } from './api-route';
import { registerClusterSocket } from './cluster-channel-route';
import { Gates, gateRequestOf } from './gate-route';
import { toHttpError } from './http-error';

const SESSIONS_ROUTE = 'GET /sessions/ws';
/**
 * The handshake authenticates the caller and holds one stream connection of its tenant's quota; the ACL decides each
 * operation on the connection on its own name (serve, call, publish, subscribe), not the connection.
 */
const SESSIONS_GATE = { action: 'agent.call', connection: true, stream: true } as const;
const admissions = new WeakMap<object, Admission>();

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
          const { status, body } = toHttpError(
            new EventMeshError(
              ErrorCode.UpgradeRequired,
              'this route is a WebSocket: connect with Upgrade: websocket',
              {
                upgrade: 'websocket',
              },
            ),
          );
          return reply.code(status).headers({ upgrade: 'websocket', connection: 'Upgrade' }).send(body);
        }
        try {
          const admission = await deps.gates.ingress.admit(
            gateRequestOf(deps.gates, SESSIONS_GATE, {
              route: SESSIONS_ROUTE,
              headers: gateHeadersOf(request.raw),
              remoteAddress: request.ip,
            }),
          );
          admissions.set(request, admission);
          request.raw.socket.once('close', admission.release);
        } catch (e) {
          const { status, body, headers } = toHttpError(e);
          return reply
            .code(status)
            .headers(headers ?? {})
            .send(body);
        }
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
  registerClusterSocket(
    app,
    SESSIONS_LINK_PATH,
    'The internal sessions link between gateway processes (a WebSocket; a cluster token of this runtime, no tenant)',
    deps,
    (socket, peer) => deps.server.attachLink(socket, peer),
  );
}

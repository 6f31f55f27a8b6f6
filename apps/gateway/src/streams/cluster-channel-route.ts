import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import {
  CHANNEL_PATH,
  CLUSTER_TOKEN_HEADER,
  ClusterCredential,
  HOLDER_QUERY,
  serveChannel,
  StreamHub,
} from '@libs/streams';
import { apiRouteConfig, errors } from '../http/api-route';
import { replyError } from '../http/http-error';

const log = createLogger('StreamChannelRoute');

type ChannelRequest = FastifyRequest<{ Querystring: Record<string, string | undefined> }>;

/**
 * The holder's end of the internal stream channel, `GET /internal/streams/channel` (a WebSocket): not a public
 * route, and not behind the request gate (no tenant calls it): the handshake must carry a cluster token made for
 * this very process (cluster-credential.ts), else it is refused with 401 UNAUTHENTICATED before anything else
 * happens. A token for another gateway process of the same instance (several share the port) is 421 MISDIRECTED,
 * and the dispatching instance connects again. docs/security.md lists it in the route coverage table.
 */
export function registerClusterChannel(
  app: NestFastifyApplication,
  deps: { hub: StreamHub; holder: string; credential: ClusterCredential },
): void {
  registerClusterSocket(
    app,
    CHANNEL_PATH,
    'The internal stream channel between instances (a WebSocket; a cluster token of this runtime, no tenant)',
    deps,
    (socket, peer) => serveChannel(socket, deps.hub, peer),
  );
}

/**
 * An internal WebSocket route between the gateway processes of one runtime (the stream channel, the sessions link):
 * the handshake's cluster token must be made for this very process, else 401 UNAUTHENTICATED (421 MISDIRECTED for
 * another process of the same instance); `serve` gets the socket and the holder id of the process that dialed.
 */
export function registerClusterSocket(
  app: NestFastifyApplication,
  path: string,
  summary: string,
  deps: { holder: string; credential: ClusterCredential },
  serve: (socket: WebSocket, peer: string) => void,
): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.get(
    path,
    {
      websocket: true,
      config: apiRouteConfig({
        summary,
        tags: ['internal'],
        internal: true,
        responses: { 101: { description: 'switched to the WebSocket protocol' }, ...errors(401, 421) },
      }),
      preValidation: async (request: ChannelRequest, reply: FastifyReply) => {
        const token = request.headers[CLUSTER_TOKEN_HEADER];
        const wanted = request.query[HOLDER_QUERY];
        const verified = deps.credential.verify(typeof token === 'string' ? token : undefined, wanted ?? deps.holder);
        let refusal: EventMeshError | undefined;
        if (!verified.ok) {
          log.warn({ remote: request.ip, path, reason: verified.reason }, 'internal channel handshake refused');
          refusal = new EventMeshError(
            ErrorCode.Unauthenticated,
            'the internal channel needs a cluster token of this runtime',
          );
        } else if (wanted !== undefined && wanted !== deps.holder) {
          refusal = new EventMeshError(ErrorCode.Misdirected, `this is gateway process ${deps.holder}, not ${wanted}`, {
            holder: deps.holder,
          });
        }
        if (refusal) return replyError(reply, refusal);
      },
    },
    (socket: WebSocket, request: ChannelRequest) => {
      const peer = deps.credential.verify(
        request.headers[CLUSTER_TOKEN_HEADER] as string,
        request.query[HOLDER_QUERY] ?? deps.holder,
      );
      serve(socket, peer.ok ? peer.from : request.ip);
    },
  );
}

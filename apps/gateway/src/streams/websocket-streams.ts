import websocket from '@fastify/websocket';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { gateHeadersOf, type Admission } from '@libs/security';
import { assertStreamHere, sendInTurn, StreamDelivery, StreamHub } from '@libs/streams';
import type { SubscriptionService } from '@libs/subscriptions';
import { apiRouteConfig, errors, GATED } from '../http/api-route';
import { Gates, gateRequestOf } from '../http/gate-route';
import { replyError, toHttpError } from '../http/http-error';
import { parseQuery } from '../http/parse-body';
import { clientFilter, outcomeOf, streamQuerySchema, wireJsonOf, windowOf } from './streams.controller';
import { answersOf, batchedPush, batchPush } from './websocket-batches';

const log = createLogger('WebSocketStreams');

const WS_ROUTE = 'GET /subscriptions/:id/ws';
/** The handshake is a subscribe on the subscription's topic, and holds a stream connection of the tenant's quota. */
const WS_GATE = { action: 'subscribe', topic: { subscriptionParam: 'id' }, stream: true } as const;
/** The largest message a stream client sends (one answer, or an `answers` message: the SDK sends at most 48 KiB). */
const MAX_ANSWER_BYTES = 64 * 1024;
/** The WebSocket route's query: the stream's, and whether the client takes batched frames (websocket-batches.ts). */
const wsQuerySchema = streamQuerySchema.extend({
  frames: z
    .enum(['single', 'batch'])
    .optional()
    .describe('`batch`: deliveries sent as `events` messages of several (`single` when absent)'),
  batches: z
    .enum(['true', 'false'])
    .optional()
    .describe(
      "`true`: the client takes a batched subscription's batches as one delivery each (`batch` messages); absent or `false`: their events one by one",
    ),
});
/** The admission of each handshake, until its socket closes. */
const admissions = new WeakMap<object, Admission>();

/**
 * The WebSocket stream transport, `GET /subscriptions/{id}/ws?window=N`. The server sends
 * `{"type":"event","deliveryId","event"}`; the client answers `{"type":"ack"|"nack"|"reject","deliveryId",
 * "delayMs"?,"reason"?}` (or extends a delivery's ack deadline, `{"type":"extend","deliveryId","deadlineMs"}`) and hears `{"type":"answered","deliveryId","accepted"}` (false for an unknown or stale
 * id) or `{"type":"error","code","message"}`. With `?frames=batch` the deliveries of one turn come as one
 * `{"type":"events","deliveries":[...]}`. A batched subscription's (`config.batch`) batch comes to a client that
 * connected with `?batches=true` as one delivery, `{"type":"batch","deliveryId","events":[...]}`, answered once for
 * all its events; any client may answer many at once with `{"type":"answers","answers":[...]}`,
 * heard as one `{"type":"answered","answers":[{"deliveryId","accepted"}...]}`. The handshake passes the request gate and the same checks as the
 * other transports (another tenant's subscription is 404 like a missing one), and fails as plain HTTP in the
 * runtime's error shape.
 */
export async function registerWebSocketStreams(
  app: NestFastifyApplication,
  deps: {
    hub: StreamHub;
    subscriptions: SubscriptionService;
    gates: Gates;
    /** The largest message any WebSocket route takes (one server serves them all: a session frame's bound). */
    maxPayload: number;
  },
): Promise<void> {
  const fastify = app.getHttpAdapter().getInstance();
  await fastify.register(websocket, { options: { maxPayload: Math.max(MAX_ANSWER_BYTES, deps.maxPayload) } });
  fastify.get<{ Params: { id: string }; Querystring: { window?: string; filter?: string; frames?: string } }>(
    '/subscriptions/:id/ws',
    {
      websocket: true,
      config: apiRouteConfig(
        {
          summary:
            'WebSocket stream: events out as `{type:"event",deliveryId,event}`, answers in as `{type:"ack"|"nack"|"reject"|"extend",deliveryId}`',
          tags: ['subscriptions'],
          params: { id: 'a STREAM subscription id' },
          query: wsQuerySchema,
          responses: {
            101: { description: 'switched to the WebSocket protocol' },
            ...errors(400, 404, 409, 426),
            ...GATED,
          },
        },
        WS_GATE,
      ),
      preValidation: async (
        request: FastifyRequest<{
          Params: { id: string };
          Querystring: { window?: string; filter?: string; frames?: string };
        }>,
        reply: FastifyReply,
      ) => {
        // A plain GET (or HEAD) is no handshake: the WebSocket plugin would answer it 404 after the gate took a
        // stream connection that no socket would ever give back. Refused before the gate, holding nothing.
        // Node's HTTP parser marks the request it hands to the server's 'upgrade' listener (`upgrade`, untyped).
        if ((request.raw as { upgrade?: boolean }).upgrade !== true) {
          return replyError(
            reply,
            new EventMeshError(
              ErrorCode.UpgradeRequired,
              'this route is a WebSocket stream: connect with Upgrade: websocket (or use /events for SSE, /poll for long-poll)',
              { upgrade: 'websocket' },
            ),
            { upgrade: 'websocket', connection: 'Upgrade' },
          );
        }
        let admission: Admission | undefined;
        try {
          admission = await deps.gates.ingress.admit(
            gateRequestOf(deps.gates, WS_GATE, {
              route: WS_ROUTE,
              headers: gateHeadersOf(request.raw),
              remoteAddress: request.ip,
              params: request.params,
            }),
          );
          admissions.set(request, admission);
          // The connection's own end gives the slot back too: a handshake the WebSocket server refuses (a bad or
          // missing Sec-WebSocket-Key) never reaches the socket handler below, whose close would.
          request.raw.socket.once('close', admission.release);
          clientFilter(parseQuery(wsQuerySchema, request.query).filter);
          await assertStreamHere(deps.subscriptions, request.params.id, admission.caller.tenant);
        } catch (e) {
          admission?.release();
          return replyError(reply, e);
        }
      },
    },
    (socket: WebSocket, request) => {
      const subscriptionId = request.params.id;
      const query = parseQuery(wsQuerySchema, request.query);
      const member = {
        id: `ws:${randomUUID()}`,
        subscriptionId,
        window: windowOf(query),
        filter: clientFilter(request.query.filter),
        push:
          query.frames === 'batch'
            ? batchedPush(socket)
            : (d: StreamDelivery) => sendInTurn(socket, wireJsonOf(d, '"type":"event",')),
        // Only a client that says it takes them gets batches (one that does not would never answer one).
        ...(query.batches === 'true' ? { pushBatch: batchPush(socket) } : {}),
        // An operator's disconnect: close code 4001 (the client may connect again).
        close: () => socket.close(4001, 'disconnected by an operator'),
      };
      deps.hub.connect(member);
      socket.on('message', (raw: Buffer) => {
        if (raw.length > MAX_ANSWER_BYTES) {
          socket.close(1009, 'an answer is at most 64 KiB');
          return;
        }
        let message: {
          type?: unknown;
          deliveryId?: unknown;
          delayMs?: unknown;
          reason?: unknown;
          deadlineMs?: unknown;
          answers?: unknown;
        };
        try {
          message = JSON.parse(String(raw)) as typeof message;
          if (message.type === 'answers') {
            const answers = answersOf(message).map(({ deliveryId, action }) => ({
              deliveryId,
              accepted: deps.hub.act(subscriptionId, deliveryId, action),
            }));
            sendInTurn(socket, JSON.stringify({ type: 'answered', answers }));
            return;
          }
          if (typeof message.deliveryId !== 'string') {
            throw new EventMeshError(ErrorCode.InvalidRequest, 'deliveryId is required', { field: 'deliveryId' });
          }
          const outcome = outcomeOf({ ...message, action: message.type }, 0);
          const accepted = deps.hub.act(subscriptionId, message.deliveryId, outcome);
          sendInTurn(socket, JSON.stringify({ type: 'answered', deliveryId: message.deliveryId, accepted }));
        } catch (e) {
          const { body } = toHttpError(
            e instanceof SyntaxError ? new EventMeshError(ErrorCode.MalformedJson, 'message is not valid JSON') : e,
          );
          // The deliveries of the refused message, so the client settles what it waits for on them.
          socket.send(JSON.stringify({ type: 'error', ...body, ...deliveriesOf(message!) }));
        }
      });
      const admission = admissions.get(request);
      socket.on('close', () => {
        deps.hub.disconnect(member);
        admission?.release();
      });
      socket.on('error', (e) => log.warn({ subscription: subscriptionId, error: e.message }, 'stream socket error'));
    },
  );
}

/** The delivery ids a refused message names (`deliveryId`, or `deliveryIds` of an `answers` list), as far as it has any. */
function deliveriesOf(message: { deliveryId?: unknown; answers?: unknown } | undefined): {
  deliveryId?: string;
  deliveryIds?: string[];
} {
  if (!message || typeof message !== 'object') return {};
  if (typeof message.deliveryId === 'string') return { deliveryId: message.deliveryId };
  if (!Array.isArray(message.answers)) return {};
  const ids = (message.answers as unknown[]).flatMap((a) =>
    a && typeof a === 'object' && typeof (a as { deliveryId?: unknown }).deliveryId === 'string'
      ? [(a as { deliveryId: string }).deliveryId]
      : [],
  );
  return ids.length > 0 ? { deliveryIds: ids } : {};
}

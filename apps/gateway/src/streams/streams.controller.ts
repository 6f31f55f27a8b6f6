import { Body, Controller, Get, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import { ErrorCode, EventMeshError, queryInt } from '@libs/errors';
import { CompiledFilter, compileFilters } from '@libs/filter';
import { frameToStructured, structuredJsonOf } from '@libs/frame';
import {
  assertStreamHere,
  ClientAction,
  MAX_ACK_DEADLINE_MS,
  PollConsumers,
  StreamClients,
  StreamDelivery,
  StreamHub,
  writeInTurn,
} from '@libs/streams';
import type { Caller } from '@libs/security';
import { SubscriptionService, subscriptionNotFound } from '@libs/subscriptions';
import { CallerParam, GateRoute } from '../http/gate-route';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { ackAnswerSchema, ackBodySchema, pollAnswerSchema, sseDeliverySchema } from '../http/api-schemas';
import { parseItem, parseQuery } from '../http/parse-body';

const MAX_WINDOW = 1000;
const MAX_WAIT_MS = 60000;

const ID = { id: 'a STREAM subscription id' };
const window = queryInt(1, MAX_WINDOW).describe('unanswered deliveries the client holds at most (10 when absent)');
const filter = z.string().optional().describe("a CESQL expression: this client's own filter (MULTICAST)");

/** The query of the SSE and WebSocket transports: the routes validate with it, the API document shows it. */
export const streamQuerySchema = z.object({ window, filter });
const pollQuerySchema = z.object({
  consumer: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/)
    .optional()
    .describe('names the client (a fresh one when absent)'),
  window,
  max: queryInt(1, MAX_WINDOW).describe('deliveries in this answer at most (window when absent)'),
  waitMs: queryInt(0, MAX_WAIT_MS).describe('how long to wait for the first, in milliseconds (20000 when absent)'),
  filter,
});

export interface Answer {
  deliveryId?: unknown;
  action?: unknown;
  delayMs?: unknown;
  reason?: unknown;
  deadlineMs?: unknown;
}

/** The window a stream client asked for (10 when absent). */
export const windowOf = (q: { window?: number }): number => q.window ?? 10;

/** A client's own MULTICAST filter: a CESQL expression in the `filter` query parameter. */
export function clientFilter(raw: string | undefined): CompiledFilter | undefined {
  return raw === undefined || raw === '' ? undefined : compileFilters([{ sql: raw }]);
}

export const toWire = (d: StreamDelivery) => ({ deliveryId: d.deliveryId, event: frameToStructured(d.frame) });

/**
 * `JSON.stringify(toWire(d))` without the intermediate objects: the event's JSON data goes in as its own text
 * (libs/frame/structured-json.ts). `members` go first, as further members of the same object (`"type":"event"`).
 */
export const wireJsonOf = (d: StreamDelivery, members = ''): string =>
  `{${members}"deliveryId":${JSON.stringify(d.deliveryId)},"event":${structuredJsonOf(d.frame)}}`;

/**
 * Stream transports of STREAM subscriptions: Server-Sent Events and long-poll, with explicit answers per delivery
 * (`ack`, `nack` to retry after a delay, `reject` to dead-letter) through `POST /subscriptions/{id}/acks`. A client
 * holds at most `window` unanswered deliveries. Clients connect to any instance that runs the gateway: the dispatching
 * instance forwards to it (libs/streams/cluster-stream-router.ts).
 * Every route is scoped by the caller's tenant: another tenant's subscription answers 404 like a missing one.
 */
@Controller('subscriptions')
export class StreamsController {
  constructor(
    private readonly hub: StreamHub,
    private readonly subscriptions: SubscriptionService,
    private readonly polls: PollConsumers,
    private readonly clients: StreamClients,
  ) {}

  private streamOf(id: string, caller: Caller): Promise<void> {
    return assertStreamHere(this.subscriptions, id, caller.tenant);
  }

  /** Server-Sent Events: one `cloudevent` message per delivery, `{ deliveryId, event }`, as long as the client stays. */
  @Get(':id/events')
  @ApiRoute({
    summary: 'Server-Sent Events: one `cloudevent` message per delivery, `{ deliveryId, event }`',
    params: ID,
    query: streamQuerySchema,
    responses: {
      200: {
        description:
          'the event stream, open as long as the client stays: a `: connected` comment first, `: keep-alive` comments every 15 s (comments are no events), and per delivery one event as the schema states',
        schema: sseDeliverySchema,
        contentType: 'text/event-stream',
      },
      ...errors(400, 404, 409),
      ...GATED,
    },
  })
  @GateRoute({ action: 'subscribe', topic: { subscriptionParam: 'id' }, stream: true })
  async sse(
    @Param('id') id: string,
    @Query() query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
    @CallerParam() caller: Caller,
  ): Promise<void> {
    const q = parseQuery(streamQuerySchema, query);
    const size = windowOf(q);
    const own = clientFilter(q.filter);
    await this.streamOf(id, caller);
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    raw.write(': connected\n\n');
    const member = {
      id: `sse:${randomUUID()}`,
      subscriptionId: id,
      window: size,
      filter: own,
      push: (d: StreamDelivery) =>
        writeInTurn(raw, () => raw.write(`id: ${d.deliveryId}\nevent: cloudevent\ndata: ${wireJsonOf(d)}\n\n`)),
      // An operator's disconnect: the stream ends (the client may connect again).
      close: () => raw.end(),
    };
    this.hub.connect(member);
    const keepAlive = setInterval(() => raw.write(': keep-alive\n\n'), 15000);
    request.raw.once('close', () => {
      clearInterval(keepAlive);
      this.hub.disconnect(member);
    });
  }

  /** Long-poll: up to `max` deliveries, waiting up to `waitMs` for the first; `consumer` names the client. */
  @Get(':id/poll')
  @ApiRoute({
    summary: 'Long-poll: up to `max` deliveries, waiting up to `waitMs` for the first',
    params: ID,
    query: pollQuerySchema,
    responses: {
      200: { description: 'the deliveries (maybe none)', schema: pollAnswerSchema },
      ...errors(400, 404, 409),
      ...GATED,
    },
  })
  @GateRoute({ action: 'subscribe', topic: { subscriptionParam: 'id' }, stream: true })
  async poll(
    @Param('id') id: string,
    @Query() query: unknown,
    @Req() request: FastifyRequest,
    @CallerParam() caller: Caller,
  ): Promise<{ consumer: string; deliveries: ReturnType<typeof toWire>[] }> {
    const { consumer, window, max, waitMs, filter } = parseQuery(pollQuerySchema, query);
    const own = clientFilter(filter);
    const size = windowOf({ window });
    const take = max ?? size;
    const wait = waitMs ?? 20000;
    await this.streamOf(id, caller);
    const name = consumer ?? randomUUID();
    const closed = new AbortController();
    request.raw.once('close', () => closed.abort());
    const deliveries = await this.polls.poll(id, name, size, take, wait, closed.signal, own);
    return { consumer: name, deliveries: deliveries.map(toWire) };
  }

  /**
   * Answers for deliveries: `{ deliveryId, action: "ack" | "nack" | "reject", delayMs?, reason? }`, or `extend`
   * with `deadlineMs` (the delivery's ack deadline set to that long from now, settling nothing), or an array of
   * them, posted to any instance: one held by another gateway process is handed to it (stream-clients.ts). An id no
   * process holds (unknown, already settled: a stale answer) is refused: 409 for a single answer, `accepted: false`
   * in a list. A subscription the caller's tenant has not is 404 before any answer is looked at.
   */
  @Post(':id/acks')
  @ApiRoute({
    summary: 'Answers for stream deliveries: ack, nack (retry after a delay) or reject (dead-letter)',
    params: ID,
    body: { schema: z.union([ackBodySchema, z.array(ackBodySchema)]) },
    responses: {
      200: { description: 'accepted (an array answers each of an array)', schema: ackAnswerSchema },
      ...errors(400, 404, 409),
      ...GATED,
    },
  })
  @GateRoute({ action: 'subscribe', topic: { subscriptionParam: 'id' } })
  @HttpCode(200)
  async acks(
    @Param('id') id: string,
    @Body() body: unknown,
    @CallerParam() caller: Caller,
  ): Promise<{ deliveryId: string; accepted: boolean }[] | { deliveryId: string; accepted: true }> {
    // topicFor is remembered, so answers cost no query after the first; a deleted subscription's deliveries are
    // unknown to the hub anyway.
    if ((await this.subscriptions.topicFor(id, caller.tenant)) === undefined) throw subscriptionNotFound(id);
    // Each answer as the document shows it, every field whatever the action (a `reason` that is not a string, a
    // `deadlineMs` past the limit are refused, not ignored).
    const answers = (Array.isArray(body) ? body : [body]).map((a, index) =>
      parseItem(ackBodySchema, a, 'answer', index),
    );
    const outcomes = answers.map((a, index) => ({ deliveryId: a.deliveryId, outcome: outcomeOf(a, index) }));
    const results = await Promise.all(
      outcomes.map(async ({ deliveryId, outcome }) => ({
        deliveryId,
        accepted: await this.clients.answer(id, deliveryId, outcome),
      })),
    );
    if (Array.isArray(body)) return results;
    if (!results[0].accepted) {
      throw new EventMeshError(
        ErrorCode.UnknownDelivery,
        `delivery ${results[0].deliveryId} is not pending (unknown, stale, or already answered)`,
        {
          deliveryId: results[0].deliveryId,
        },
      );
    }
    return { deliveryId: results[0].deliveryId, accepted: true };
  }
}

/** An answer's action as the hub's outcome; a 400 for an unknown action or a bad delay. */
export function outcomeOf(a: Answer, index: number): ClientAction {
  switch (a.action) {
    case 'ack':
      return { kind: 'ack' };
    case 'nack': {
      const delayMs = a.delayMs === undefined ? 1000 : Number(a.delayMs);
      if (!Number.isInteger(delayMs) || delayMs < 0 || delayMs > 3600000) {
        throw new EventMeshError(
          ErrorCode.InvalidRequest,
          `answer ${index}: delayMs must be an integer from 0 to 3600000`,
          { field: 'delayMs', index },
        );
      }
      return { kind: 'nack', delayMs };
    }
    case 'reject':
      return { kind: 'reject', reason: typeof a.reason === 'string' ? a.reason.slice(0, 500) : 'rejected' };
    case 'extend': {
      const deadlineMs = a.deadlineMs;
      if (
        typeof deadlineMs !== 'number' ||
        !Number.isInteger(deadlineMs) ||
        deadlineMs < 1 ||
        deadlineMs > MAX_ACK_DEADLINE_MS
      ) {
        throw new EventMeshError(
          ErrorCode.InvalidRequest,
          `answer ${index}: extend needs deadlineMs, an integer from 1 to ${MAX_ACK_DEADLINE_MS}`,
          { field: 'deadlineMs', index },
        );
      }
      return { kind: 'extend', deadlineMs };
    }
    default:
      throw new EventMeshError(
        ErrorCode.InvalidRequest,
        `answer ${index}: action must be ack, nack, reject or extend`,
        { field: 'action', index },
      );
  }
}

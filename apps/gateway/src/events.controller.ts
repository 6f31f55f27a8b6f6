import { Body, Controller, Headers, HttpCode, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, EventMeshError } from '../../../libs/errors';
import { frameToStructured } from '../../../libs/frame';
import { toFrames } from '../../../libs/ingress';
import { DEFAULT_REQUEST_TIMEOUT_MS, MAX_REQUEST_TIMEOUT_MS, RequestReplyService } from '../../../libs/request-reply';
import { SubscriptionService, SubscriptionView } from '../../../libs/subscriptions';
import { rawBodyOf } from './body-parsers';
import { publishRequestOf } from './content-mode';
import { GateRoute } from './gate-route';

function timeoutOf(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_REQUEST_TIMEOUT_MS;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_REQUEST_TIMEOUT_MS) {
    throw new EventMeshError(ErrorCode.InvalidRequest, `timeoutMs must be an integer from 1 to ${MAX_REQUEST_TIMEOUT_MS}`, {
      field: 'timeoutMs',
    });
  }
  return n;
}

@Controller('events')
export class EventsController {
  constructor(
    private readonly subscriptions: SubscriptionService,
    private readonly requestReply: RequestReplyService,
  ) {}

  // POST /events/publish is served by publish-route.ts, ahead of Nest: it is the hot path.

  /**
   * Publishes one event with a fresh `correlationid` and holds the request until a reply with that id arrives
   * through `POST /events/reply` on any instance (200, the reply in structured mode), or `timeoutMs` passes (408).
   */
  @Post('request')
  @GateRoute({ action: 'publish', topic: { query: 'topic' }, publishes: true })
  async request(
    @Query('topic') topic: string | undefined,
    @Query('timeoutMs') timeoutMs: string | undefined,
    @Headers() headers: Record<string, string | undefined>,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    const timeout = timeoutOf(timeoutMs);
    const answer = await this.requestReply.request(topic || undefined, publishRequestOf(headers, body, rawBodyOf(request), false), timeout);
    void reply.status(200).header('content-type', 'application/cloudevents+json; charset=utf-8');
    return frameToStructured(answer);
  }

  /**
   * A reply to a pending request (its `correlationid` extension names it): 202 `delivered: true` once stored for
   * the live process holding the request; 404 `REQUEST_NOT_PENDING` (`delivered: false`, `reason`) otherwise.
   */
  @Post('reply')
  @GateRoute({ action: 'publish', publishes: true })
  @HttpCode(202)
  async replyTo(
    @Headers() headers: Record<string, string | undefined>,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ): Promise<{ correlationId: string; delivered: true }> {
    const [frame] = toFrames(publishRequestOf(headers, body, rawBodyOf(request), false), 1);
    return this.requestReply.reply(frame);
  }

  /** Alias of `POST /subscriptions`. */
  @Post('subscribe')
  @GateRoute({ action: 'subscribe', topic: { body: 'topic' }, createsSubscription: true })
  @HttpCode(201)
  subscribe(@Body() body: unknown): Promise<SubscriptionView> {
    return this.subscriptions.create(body);
  }

  /** Alias of `DELETE /subscriptions/{id}`: `{ "id": "..." }`. */
  @Post('unsubscribe')
  @GateRoute({ action: 'subscribe', topic: { subscriptionBody: 'id' } })
  @HttpCode(204)
  async unsubscribe(@Body() body: { id?: unknown } | undefined): Promise<void> {
    if (typeof body?.id !== 'string') {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'id: the subscription id is required', { field: 'id' });
    }
    await this.subscriptions.delete(body.id);
  }
}

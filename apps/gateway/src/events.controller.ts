import { Body, Controller, Headers, HttpCode, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, EventMeshError } from '../../../libs/errors';
import { frameToStructured } from '../../../libs/frame';
import { toFrames } from '../../../libs/ingress';
import { DEFAULT_REQUEST_TIMEOUT_MS, MAX_REQUEST_TIMEOUT_MS, RequestReplyService } from '../../../libs/request-reply';
import type { Caller } from '../../../libs/security';
import { SubscriptionService, SubscriptionView } from '../../../libs/subscriptions';
import { rawBodyOf } from './body-parsers';
import { publishRequestOf } from './content-mode';
import { CallerParam, GateRoute } from './gate-route';

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
   * Only a reply of the caller's tenant answers it.
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
    @CallerParam() caller: Caller,
  ): Promise<Record<string, unknown>> {
    const timeout = timeoutOf(timeoutMs);
    const publish = publishRequestOf(headers, body, rawBodyOf(request), false);
    const answer = await this.requestReply.request(topic || undefined, publish, timeout, caller.tenant);
    void reply.status(200).header('content-type', 'application/cloudevents+json; charset=utf-8');
    return frameToStructured(answer);
  }

  /**
   * A reply to a pending request (its `correlationid` extension names it): 202 `delivered: true` once stored for
   * the live process holding the request; 404 `REQUEST_NOT_PENDING` (`delivered: false`, `reason`) otherwise,
   * and for a request of another tenant (`unknown`, as if it never existed).
   */
  @Post('reply')
  @GateRoute({ action: 'publish', publishes: true })
  @HttpCode(202)
  async replyTo(
    @Headers() headers: Record<string, string | undefined>,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @CallerParam() caller: Caller,
  ): Promise<{ correlationId: string; delivered: true }> {
    const [frame] = toFrames(publishRequestOf(headers, body, rawBodyOf(request), false), 1);
    return this.requestReply.reply(frame, caller.tenant);
  }

  /** Alias of `POST /subscriptions`. */
  @Post('subscribe')
  @GateRoute({ action: 'subscribe', topic: { body: 'topic' }, createsSubscription: true })
  @HttpCode(201)
  subscribe(@Body() body: unknown, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.create(body, caller.tenant);
  }

  /** Alias of `DELETE /subscriptions/{id}`: `{ "id": "..." }`. */
  @Post('unsubscribe')
  @GateRoute({ action: 'subscribe', topic: { subscriptionBody: 'id' } })
  @HttpCode(204)
  async unsubscribe(@Body() body: { id?: unknown } | undefined, @CallerParam() caller: Caller): Promise<void> {
    if (typeof body?.id !== 'string') {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'id: the subscription id is required', { field: 'id' });
    }
    await this.subscriptions.delete(body.id, caller.tenant);
  }
}

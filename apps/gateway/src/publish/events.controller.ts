import { Body, Controller, Headers, HttpCode, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, EventMeshError, queryInt } from '@libs/errors';
import { AdaptorRegistry, frameToStructured } from '@libs/frame';
import { toFrames } from '@libs/ingress';
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  MAX_REQUEST_TIMEOUT_MS,
  RequestReplyService,
} from '@libs/request-reply';
import type { Caller } from '@libs/security';
import { createSubscriptionSchema, SubscriptionService, SubscriptionView } from '@libs/subscriptions';
import { z } from 'zod';
import { rawBodyOf } from '../http/body-parsers';
import { publishRequestOf } from '../http/content-mode';
import { ApiRoute, errors, GATED } from '../http/api-route';
import {
  publishedEventSchema,
  replyAnswerSchema,
  replyEventSchema,
  structuredEventSchema,
  subscriptionViewSchema,
} from '../http/api-schemas';
import { CallerParam, GateRoute } from '../http/gate-route';
import { parseQuery } from '../http/parse-body';

/** The request-reply route's query: it validates with it, the API document shows it. */
const requestQuerySchema = z.object({
  topic: z.string().optional().describe("the topic (the runtime's default when absent)"),
  timeoutMs: queryInt(1, MAX_REQUEST_TIMEOUT_MS).describe(
    `how long to wait, in milliseconds (${DEFAULT_REQUEST_TIMEOUT_MS} when absent)`,
  ),
});

/** A CloudEvent body: structured JSON, or any bytes with `ce-*` headers (binary mode). */
const EVENT_BODY = {
  schema: publishedEventSchema,
  contentTypes: ['application/cloudevents+json', 'application/json'],
  description:
    'a CloudEvent, structured JSON; or in binary mode: any content type with `ce-*` headers (the body is the data)',
};

@Controller('events')
export class EventsController {
  constructor(
    private readonly subscriptions: SubscriptionService,
    private readonly requestReply: RequestReplyService,
    private readonly adaptors: AdaptorRegistry,
  ) {}

  // POST /events/publish is served by publish-route.ts, ahead of Nest: it is the hot path.

  /**
   * Publishes one event with a fresh `correlationid` and holds the request until a reply with that id arrives
   * through `POST /events/reply` on any instance (200, the reply in structured mode), or `timeoutMs` passes (408).
   * Only a reply of the caller's tenant answers it.
   */
  @Post('request')
  @ApiRoute({
    summary: 'Publish one event and wait for its reply',
    query: requestQuerySchema,
    body: EVENT_BODY,
    responses: {
      200: {
        description: 'the reply, in the structured mode',
        schema: structuredEventSchema,
        contentType: 'application/cloudevents+json',
      },
      ...errors(400, 404, 408, 413, 415),
      ...GATED,
    },
  })
  @GateRoute({ action: 'publish', topic: { query: 'topic' }, publishes: true })
  async request(
    @Query() query: unknown,
    @Headers() headers: Record<string, string | undefined>,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
    @CallerParam() caller: Caller,
  ): Promise<Record<string, unknown>> {
    const { topic, timeoutMs } = parseQuery(requestQuerySchema, query);
    const publish = publishRequestOf(this.adaptors, headers, { raw: rawBodyOf(request), parsed: body }, false);
    const answer = await this.requestReply.request(
      topic || undefined,
      publish,
      timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
      caller.tenant,
    );
    void reply.status(200).header('content-type', 'application/cloudevents+json; charset=utf-8');
    return frameToStructured(answer);
  }

  /**
   * A reply to a pending request (its `correlationid` extension names it): 202 `delivered: true` once stored for
   * the live process holding the request; 404 `REQUEST_NOT_PENDING` (`delivered: false`, `reason`) otherwise,
   * and for a request of another tenant (`unknown`, as if it never existed).
   */
  @Post('reply')
  @ApiRoute({
    summary: 'Reply to a pending request (its `correlationid` names it)',
    body: { ...EVENT_BODY, schema: replyEventSchema },
    responses: {
      202: { description: 'stored for the process holding the request', schema: replyAnswerSchema },
      ...errors(400, 404, 413, 415),
      ...GATED,
    },
  })
  @GateRoute({ action: 'publish', publishes: true })
  @HttpCode(202)
  async replyTo(
    @Headers() headers: Record<string, string | undefined>,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @CallerParam() caller: Caller,
  ): Promise<{ correlationId: string; delivered: true }> {
    const publish = publishRequestOf(this.adaptors, headers, { raw: rawBodyOf(request), parsed: body }, false);
    const [frame] = toFrames(publish, 1);
    return this.requestReply.reply(frame, caller.tenant);
  }

  /** Alias of `POST /subscriptions`. */
  @Post('subscribe')
  @ApiRoute({
    summary: 'Create a subscription (alias of POST /subscriptions)',
    body: { schema: createSubscriptionSchema },
    responses: { 201: { description: 'created', schema: subscriptionViewSchema }, ...errors(400, 404), ...GATED },
  })
  @GateRoute({ action: 'subscribe', topic: { body: 'topic' }, createsSubscription: true })
  @HttpCode(201)
  subscribe(@Body() body: unknown, @CallerParam() caller: Caller): Promise<SubscriptionView> {
    return this.subscriptions.create(body, caller);
  }

  /** Alias of `DELETE /subscriptions/{id}`: `{ "id": "..." }`. */
  @Post('unsubscribe')
  @ApiRoute({
    summary: 'Delete a subscription (alias of DELETE /subscriptions/{id})',
    body: { schema: z.object({ id: z.string() }) },
    responses: { 204: { description: 'deleted' }, ...errors(400, 404), ...GATED },
  })
  @GateRoute({ action: 'subscribe', topic: { subscriptionBody: 'id' } })
  @HttpCode(204)
  async unsubscribe(@Body() body: { id?: unknown } | undefined, @CallerParam() caller: Caller): Promise<void> {
    if (typeof body?.id !== 'string') {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'id: the subscription id is required', { field: 'id' });
    }
    await this.subscriptions.delete(body.id, caller.tenant);
  }
}

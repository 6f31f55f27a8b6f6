import { Body, Controller, Headers, HttpCode, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { queryInt } from '@libs/errors';
import { AdaptorRegistry, frameToStructured } from '@libs/frame';
import { toFrames } from '@libs/ingress';
import { DEFAULT_REQUEST_TIMEOUT_MS, MAX_REQUEST_TIMEOUT_MS, RequestReplyService } from '@libs/request-reply';
import type { Caller } from '@libs/security';
import { z } from 'zod';
import { rawBodyOf } from '../http/body-parsers';
import { publishRequestOf } from '../http/content-mode';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { publishedEventSchema, replyAnswerSchema, replyEventSchema, structuredEventSchema } from '../http/api-schemas';
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
export class RequestReplyController {
  constructor(
    private readonly requestReply: RequestReplyService,
    private readonly adaptors: AdaptorRegistry,
  ) {}

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
}

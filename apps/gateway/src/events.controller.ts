import { Body, Controller, Headers, HttpCode, Post, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, EventMeshError } from '../../../libs/errors';
import { frameToStructured } from '../../../libs/frame';
import { EventIngress, PublishRequest, PublishResult, toFrames } from '../../../libs/ingress';
import { DEFAULT_REQUEST_TIMEOUT_MS, MAX_REQUEST_TIMEOUT_MS, RequestReplyService } from '../../../libs/request-reply';
import { SubscriptionService, SubscriptionView } from '../../../libs/subscriptions';
import { rawBodyOf } from './body-parsers';

const STRUCTURED_TYPES = ['application/cloudevents+json', 'application/json'];
const BATCH_TYPE = 'application/cloudevents-batch+json';

/** Which content mode of the CloudEvents HTTP binding a request uses; `batch` only where a route takes it. */
function publishRequestOf(
  headers: Record<string, string | undefined>,
  body: unknown,
  request: FastifyRequest,
  allowBatch: boolean,
): PublishRequest {
  const mediaType = (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (headers['ce-specversion'] !== undefined) return { mode: 'binary', headers, body: rawBodyOf(request) };
  if (STRUCTURED_TYPES.includes(mediaType)) return { mode: 'structured', body };
  if (allowBatch && mediaType === BATCH_TYPE) return { mode: 'batch', body };
  const accepted = [...STRUCTURED_TYPES, ...(allowBatch ? [BATCH_TYPE] : []), 'any type with ce-* headers (binary mode)'];
  throw new EventMeshError(
    ErrorCode.UnsupportedMediaType,
    `content type "${mediaType || '(none)'}" is not accepted here without ce-* headers; send ${accepted.join(', ')}`,
    { accepted },
  );
}

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
    private readonly ingress: EventIngress,
    private readonly subscriptions: SubscriptionService,
    private readonly requestReply: RequestReplyService,
  ) {}

  /**
   * Publishes CloudEvents in any content mode of the HTTP binding: binary (`ce-*` headers, the body is the
   * data), structured (`application/cloudevents+json`) or batch (`application/cloudevents-batch+json`).
   * Answers 202 once Kafka acknowledged every event: one result for structured and binary, `{ results }` for a batch.
   */
  @Post('publish')
  @HttpCode(202)
  async publish(
    @Query('topic') topic: string | undefined,
    @Headers() headers: Record<string, string | undefined>,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ): Promise<PublishResult | { results: PublishResult[] }> {
    const publish = publishRequestOf(headers, body, request, true);
    const results = await this.ingress.publish(topic || undefined, publish);
    return publish.mode === 'batch' ? { results } : results[0];
  }

  /**
   * Publishes one event with a fresh `correlationid` and holds the request until a reply with that id arrives
   * through `POST /events/reply` on any instance (200, the reply in structured mode), or `timeoutMs` passes (408).
   */
  @Post('request')
  async request(
    @Query('topic') topic: string | undefined,
    @Query('timeoutMs') timeoutMs: string | undefined,
    @Headers() headers: Record<string, string | undefined>,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    const timeout = timeoutOf(timeoutMs);
    const answer = await this.requestReply.request(topic || undefined, publishRequestOf(headers, body, request, false), timeout);
    void reply.status(200).header('content-type', 'application/cloudevents+json; charset=utf-8');
    return frameToStructured(answer);
  }

  /** A reply to a pending request (its `correlationid` extension names it); 404 when none is waiting. */
  @Post('reply')
  @HttpCode(202)
  async replyTo(
    @Headers() headers: Record<string, string | undefined>,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
  ): Promise<{ correlationId: string; delivered: true }> {
    const [frame] = toFrames(publishRequestOf(headers, body, request, false), 1);
    return { ...(await this.requestReply.reply(frame)), delivered: true };
  }

  /** Alias of `POST /subscriptions`. */
  @Post('subscribe')
  @HttpCode(201)
  subscribe(@Body() body: unknown): Promise<SubscriptionView> {
    return this.subscriptions.create(body);
  }

  /** Alias of `DELETE /subscriptions/{id}`: `{ "id": "..." }`. */
  @Post('unsubscribe')
  @HttpCode(204)
  async unsubscribe(@Body() body: { id?: unknown } | undefined): Promise<void> {
    if (typeof body?.id !== 'string') {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'id: the subscription id is required', { field: 'id' });
    }
    await this.subscriptions.delete(body.id);
  }
}

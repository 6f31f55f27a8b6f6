import { Body, Controller, Headers, HttpCode, Post, Query, Req } from '@nestjs/common';
import { SubscriptionService, SubscriptionView } from '../../../libs/subscriptions';
import type { FastifyRequest } from 'fastify';
import { ErrorCode, EventMeshError } from '../../../libs/errors';
import { EventIngress, PublishRequest, PublishResult } from '../../../libs/ingress';
import { rawBodyOf } from './body-parsers';

const STRUCTURED_TYPES = ['application/cloudevents+json', 'application/json'];
const BATCH_TYPE = 'application/cloudevents-batch+json';

@Controller('events')
export class EventsController {
  constructor(
    private readonly ingress: EventIngress,
    private readonly subscriptions: SubscriptionService,
  ) {}

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
    const mediaType = (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    let publish: PublishRequest;
    if (headers['ce-specversion'] !== undefined) {
      publish = { mode: 'binary', headers, body: rawBodyOf(request) };
    } else if (STRUCTURED_TYPES.includes(mediaType)) {
      publish = { mode: 'structured', body };
    } else if (mediaType === BATCH_TYPE) {
      publish = { mode: 'batch', body };
    } else {
      const accepted = [...STRUCTURED_TYPES, BATCH_TYPE, 'any type with ce-* headers (binary mode)'];
      throw new EventMeshError(
        ErrorCode.UnsupportedMediaType,
        `content type "${mediaType || '(none)'}" is not accepted without ce-* headers; send ${accepted.join(', ')}`,
        { accepted },
      );
    }
    const results = await this.ingress.publish(topic || undefined, publish);
    return publish.mode === 'batch' ? { results } : results[0];
  }
}

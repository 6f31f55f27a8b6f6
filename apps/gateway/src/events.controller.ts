import { Body, Controller, Headers, HttpCode, Post, Query } from '@nestjs/common';
import { ErrorCode, EventMeshError } from '../../../libs/errors';
import { EventIngress, PublishResult } from '../../../libs/ingress';

const STRUCTURED_TYPES = ['application/cloudevents+json', 'application/json'];

@Controller('events')
export class EventsController {
  constructor(private readonly ingress: EventIngress) {}

  /** Publishes one CloudEvent (structured JSON mode); answers once Kafka acknowledged it. */
  @Post('publish')
  @HttpCode(202)
  async publish(
    @Query('topic') topic: string | undefined,
    @Headers('content-type') contentType: string | undefined,
    @Body() body: unknown,
  ): Promise<PublishResult> {
    const mediaType = (contentType ?? '').split(';')[0].trim().toLowerCase();
    if (!STRUCTURED_TYPES.includes(mediaType)) {
      throw new EventMeshError(
        ErrorCode.UnsupportedMediaType,
        `content type "${mediaType || '(none)'}" is not accepted; send ${STRUCTURED_TYPES.join(' or ')}`,
        { accepted: STRUCTURED_TYPES },
      );
    }
    return this.ingress.publishStructured(topic || undefined, body);
  }
}

import type { FastifyRequest } from 'fastify';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { parsesOwnBody } from '../a2a/a2a-paths';
import type { AdaptorRegistry } from '@libs/frame';
import { parseJsonBody } from './content-mode';

const RAW_BODY = Symbol('rawBody');

/** The request body as received, for binary-mode CloudEvents whose data must pass through untouched. */
export function rawBodyOf(request: FastifyRequest): Buffer | undefined {
  return (request as unknown as Record<symbol, Buffer | undefined>)[RAW_BODY];
}

/**
 * Body parsing owned by the runtime: every body is kept as bytes; bodies of the media types an adaptor reads as
 * JSON (`adaptors`) are also parsed, except when another adaptor takes the request by its header (CloudEvents
 * binary mode: `ce-specversion`, where the body is opaque event data), and on an A2A agent's endpoints, which parse
 * their own (malformed JSON is the protocol's error there). Malformed JSON is a 400 in the runtime's error shape;
 * every other content type reaches the route as bytes, and the route decides.
 */
export function registerBodyParsers(app: NestFastifyApplication, adaptors: AdaptorRegistry): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.removeAllContentTypeParsers();
  const keep = (request: FastifyRequest, body: Buffer) => {
    (request as unknown as Record<symbol, Buffer>)[RAW_BODY] = body;
  };
  fastify.addContentTypeParser(adaptors.jsonMediaTypes(), { parseAs: 'buffer' }, (request, body, done) => {
    keep(request, body as Buffer);
    if (!adaptors.find(request.headers, { batch: true })?.json || parsesOwnBody(request.url)) return done(null, body);
    try {
      done(null, parseJsonBody(body as Buffer));
    } catch (e) {
      done(e as Error, undefined);
    }
  });
  fastify.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
    keep(request, body as Buffer);
    done(null, body);
  });
}

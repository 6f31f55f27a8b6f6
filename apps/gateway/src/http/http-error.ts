import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ErrorCode, EventMeshError, HTTP_STATUS_BY_CODE } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { GateRefusal } from '@libs/security';
import { isKafkaUnavailable } from '@libs/kafka';
import { isPostgresUnavailable } from '@libs/storage';

export interface HttpErrorBody {
  code: string;
  message: string;
  [detail: string]: unknown;
}

const log = createLogger('HttpError');

/** Fastify's own request errors (body parsing, limits) in the runtime's codes. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ErrorCode.PayloadTooLarge,
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ErrorCode.UnsupportedMediaType,
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ErrorCode.InvalidRequest,
  FST_ERR_CTP_EMPTY_JSON_BODY: ErrorCode.MalformedJson,
  FST_ERR_CTP_INVALID_JSON_BODY: ErrorCode.MalformedJson,
};

/** Nest's own HTTP exceptions (unknown routes, its media-type checks) by status. */
const STATUS_CODES: Record<number, ErrorCode> = {
  404: ErrorCode.NotFound,
  413: ErrorCode.PayloadTooLarge,
  415: ErrorCode.UnsupportedMediaType,
};

/**
 * The one mapping from an error to an HTTP status and a JSON body `{ code, message, ...details }`. An error that
 * names a wait (`retryAfterSeconds`: shed work, Kafka unavailable) carries it as `Retry-After` too; a gate
 * refusal carries its own headers (`WWW-Authenticate`, `RateLimit`, `Retry-After`).
 */
export function toHttpError(e: unknown): { status: number; body: HttpErrorBody; headers?: Record<string, string> } {
  if (e instanceof EventMeshError) {
    const wait = e.details.retryAfterSeconds;
    const headers = {
      ...(typeof wait === 'number' ? { 'retry-after': String(wait) } : {}),
      ...(e instanceof GateRefusal ? e.headers : {}),
    };
    return {
      status: HTTP_STATUS_BY_CODE[e.code],
      body: { code: e.code, message: e.message, ...e.details },
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
    };
  }
  const fastifyCode = (e as { code?: string }).code;
  if (fastifyCode && FASTIFY_CODES[fastifyCode]) {
    const code = FASTIFY_CODES[fastifyCode];
    return { status: HTTP_STATUS_BY_CODE[code], body: { code, message: (e as Error).message } };
  }
  if (e instanceof HttpException) {
    const status = e.getStatus();
    const code = STATUS_CODES[status] ?? (status < 500 ? ErrorCode.InvalidRequest : ErrorCode.Internal);
    return { status, body: { code, message: e.message } };
  }
  const outage = outageOf(e);
  if (outage) {
    // The request may be repeated: 503 with a wait, not a 500 that reads as a bug.
    log.warn({ error: (e as Error).message }, `${outage.dependency} unavailable; answered 503`);
    return outage.answer;
  }
  log.error({ err: e }, 'unhandled error');
  return { status: 500, body: { code: ErrorCode.Internal, message: 'internal error' } };
}

/**
 * A dependency that could not serve the request now (Kafka, Postgres), and the 503 with `Retry-After` that answers
 * it; undefined for any other error. Kafka first: a kafkajs connection error carries the socket's code
 * (ECONNREFUSED) as a Postgres one does.
 */
export function outageOf(e: unknown):
  | {
      dependency: 'Kafka' | 'Postgres';
      answer: { status: number; body: HttpErrorBody; headers: Record<string, string> };
    }
  | undefined {
  const headers = { 'retry-after': '1' };
  if (isKafkaUnavailable(e)) {
    const code = ErrorCode.KafkaUnavailable;
    return {
      dependency: 'Kafka',
      answer: {
        status: HTTP_STATUS_BY_CODE[code],
        body: { code, message: 'Kafka is unavailable; try again', retryAfterSeconds: 1 },
        headers,
      },
    };
  }
  if (isPostgresUnavailable(e)) {
    const code = ErrorCode.DependencyUnavailable;
    return {
      dependency: 'Postgres',
      answer: {
        status: HTTP_STATUS_BY_CODE[code],
        body: { code, message: 'Postgres is unavailable; try again', dependency: 'postgres' },
        headers,
      },
    };
  }
  return undefined;
}

/**
 * Answers `e` on a Fastify reply as every route does ({@link toHttpError}: status, `{ code, message }` body, headers
 * such as Retry-After), with `extra` headers on top (a `connection: close`, an `upgrade`).
 */
export function replyError(reply: FastifyReply, e: unknown, extra?: Record<string, string>): FastifyReply {
  const { status, body, headers } = toHttpError(e);
  return reply
    .code(status)
    .headers({ ...headers, ...extra })
    .send(body);
}

@Catch()
export class HttpErrorFilter implements ExceptionFilter {
  catch(e: unknown, host: ArgumentsHost): void {
    void replyError(host.switchToHttp().getResponse<FastifyReply>(), e);
  }
}

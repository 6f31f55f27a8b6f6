import { ErrorCode, EventMeshError } from '@libs/errors';
import type { PublishRequest } from '@libs/ingress';
import { requestTraceOf } from '@libs/tracing';

const STRUCTURED_TYPES = ['application/cloudevents+json', 'application/json'];
const BATCH_TYPE = 'application/cloudevents-batch+json';

/** The media types whose bodies are parsed as JSON (outside the binary mode). */
export const JSON_TYPES = [...STRUCTURED_TYPES, BATCH_TYPE];

/** `application/cloudevents+json` from `Application/CloudEvents+JSON; charset=utf-8`. */
export function mediaTypeOf(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0].trim().toLowerCase();
}

/** A JSON body parsed, or a 400 `MALFORMED_JSON`. */
export function parseJsonBody(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new EventMeshError(ErrorCode.MalformedJson, `request body is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * Which content mode of the CloudEvents HTTP binding a request uses: binary when it carries `ce-specversion`
 * (the raw body is the data), structured or batch by its media type (`body` is the parsed JSON); `batch` only
 * where the route takes it. Anything else is a 415 that names what is accepted. The request's `traceparent` and
 * `tracestate` headers go with it when valid; malformed ones are ignored, never refused (W3C trace-context).
 */
export function publishRequestOf(
  headers: Record<string, string | string[] | undefined>,
  body: unknown,
  rawBody: Buffer | undefined,
  allowBatch: boolean,
): PublishRequest {
  const trace = requestTraceOf(headers);
  if (headers['ce-specversion'] !== undefined) return { mode: 'binary', headers, body: rawBody, trace };
  const mediaType = mediaTypeOf(headers['content-type'] as string | undefined);
  if (STRUCTURED_TYPES.includes(mediaType)) return { mode: 'structured', body, trace };
  if (allowBatch && mediaType === BATCH_TYPE) return { mode: 'batch', body, trace };
  const accepted = [
    ...STRUCTURED_TYPES,
    ...(allowBatch ? [BATCH_TYPE] : []),
    'any type with ce-* headers (binary mode)',
  ];
  throw new EventMeshError(
    ErrorCode.UnsupportedMediaType,
    `content type "${mediaType || '(none)'}" is not accepted here without ce-* headers; send ${accepted.join(', ')}`,
    { accepted },
  );
}

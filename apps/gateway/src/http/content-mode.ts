import { ErrorCode, EventMeshError } from '@libs/errors';
import type { AdaptorRegistry } from '@libs/frame';
import type { PublishRequest } from '@libs/ingress';
import { requestTraceOf } from '@libs/tracing';

/** A JSON body parsed, or a 400 `MALFORMED_JSON`. */
export function parseJsonBody(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new EventMeshError(ErrorCode.MalformedJson, `request body is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * A request carrying events, with the adaptor the registry picks for it (a 415 naming what is accepted when none
 * reads it; a batch adaptor only where the route takes a batch). For an adaptor that reads JSON the body is parsed
 * here (a 400 `MALFORMED_JSON`), unless the framework parsed it already (`body.parsed`: body-parsers.ts). The
 * request's `traceparent` and `tracestate` headers go with it when valid; malformed ones are ignored, never refused
 * (W3C trace-context).
 */
export function publishRequestOf(
  adaptors: AdaptorRegistry,
  headers: Record<string, string | string[] | undefined>,
  body: { raw: Buffer | undefined; parsed?: unknown },
  batch: boolean,
): PublishRequest {
  const trace = requestTraceOf(headers);
  const adaptor = adaptors.adaptorFor(headers, { batch });
  let parsed: unknown;
  if (adaptor.json) parsed = 'parsed' in body ? body.parsed : parseJsonBody(body.raw ?? Buffer.alloc(0));
  return { adaptor, message: { headers, body: body.raw, parsed }, trace };
}

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AccessLog } from '@libs/logging';
import { requestIdOf } from '@libs/security';

/** The response header (and the request header a caller may send) that names a request. */
export const REQUEST_ID_HEADER = 'x-request-id';

const REQUEST_ID = Symbol('requestId');

/** The id `RequestLog.begin` gave the request, if it passed the gateway's request handler (an upgrade does not). */
export function requestIdOfRequest(request: IncomingMessage): string | undefined {
  return (request as unknown as Record<symbol, string | undefined>)[REQUEST_ID];
}

/**
 * The first thing the gateway's HTTP server does with every request (the publish route ahead of Fastify and
 * Fastify's routes alike): names it, with the caller's `x-request-id` when it sent a usable one (1 to 128
 * characters of `[A-Za-z0-9._:-]`, libs/security/request-id.ts) or a fresh UUID; answers with the id in
 * `x-request-id`; hands the id to the request gate (its audit records name the same id) and to the publish (the
 * events' Kafka records carry it, and the delivery logs name it); and writes the access line when the answer is
 * done (libs/logging/access-log.ts). WebSocket upgrades do not pass here: the gate names those itself.
 */
export class RequestLog {
  constructor(private readonly access: AccessLog) {}

  begin(request: IncomingMessage, response: ServerResponse): void {
    const id = requestIdOf(request.headers);
    (request as unknown as Record<symbol, string>)[REQUEST_ID] = id;
    response.setHeader(REQUEST_ID_HEADER, id);
    const started = performance.now();
    response.once('close', () => {
      const status = response.statusCode;
      if (!this.access.wants(status)) return;
      const url = request.url ?? '';
      const queryAt = url.indexOf('?');
      this.access.write({
        requestId: id,
        method: request.method ?? '',
        path: queryAt === -1 ? url : url.slice(0, queryAt),
        status,
        durationMs: performance.now() - started,
        aborted: !response.writableFinished,
      });
    });
  }
}

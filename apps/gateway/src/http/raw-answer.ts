import type { ServerResponse } from 'node:http';
import { toHttpError } from './http-error';

/**
 * A JSON answer written on the HTTP server's own response, for what answers ahead of Fastify (the publish route,
 * the connection cap, a worker-only process's probes): the content type and length every route answers with, and
 * the caller's headers (`connection: close`, `retry-after`, ...). Nothing is written once the headers went out.
 */
export function answerJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers?: Record<string, string>,
): void {
  if (response.headersSent) return;
  const json = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(json),
    ...headers,
  });
  response.end(json);
}

/** An error answered as every route answers it (toHttpError: its status, `{ code, message }` body and headers). */
export function answerError(
  response: ServerResponse,
  e: unknown,
  headers?: Record<string, string>,
): { status: number; code: string } {
  const { status, body, headers: errorHeaders } = toHttpError(e);
  answerJson(response, status, body, { ...headers, ...errorHeaders });
  return { status, code: body.code };
}

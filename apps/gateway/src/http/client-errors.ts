import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { ErrorCode } from '@libs/errors';

/**
 * What the HTTP server answers a client it gives up on before any route sees the request (Fastify's
 * `clientErrorHandler`): a request not received within the slow-client timeouts is 408 `CLIENT_TIMEOUT`, headers
 * over Node's size limit 431, any other unparsable request 400 `INVALID_REQUEST`, in the `{ code, message }` body
 * every route answers with; the connection is then closed. A connection already gone gets nothing.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [
          408,
          ErrorCode.ClientTimeout,
          'the request was not received within the time allowed (its headers, or the whole of it)',
        ]
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, ErrorCode.InvalidRequest, 'the request headers are larger than the server accepts']
        : [400, ErrorCode.InvalidRequest, 'the request is not valid HTTP'];
  const body = JSON.stringify({ code, message });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { errorOf, ConnectionError } from '../errors';
import { parseBody } from '../http';
import {
  RUNTIME_REFUSALS,
  streamPath,
  streamQuery,
  TransportRefusedError,
  type Answer,
  type Connect,
  type Connection,
  type WireDelivery,
} from './connection';

/**
 * `GET /subscriptions/{id}/ws`: deliveries in as `{type:"event",deliveryId,event}`, answers out on the same socket,
 * each confirmed by `{type:"answered",deliveryId,accepted}`. A handshake answered with anything but 101 is the
 * runtime's typed error when it is one of its refusals (`RUNTIME_REFUSALS`); any other answer, or a connection
 * reset during the handshake, means something between refuses upgrades: `TransportRefusedError`.
 */
export const connectWebSocket: Connect = async (p) => {
  const url = p.http.urlOf(streamPath(p, 'ws'), streamQuery(p)).replace(/^http/, 'ws');
  const socket = new WebSocket(url, { headers: await p.http.authHeaders() });
  // The runtime confirms a delivery's answers in the order they were sent (an extension, then the ack, say).
  const answers = new Map<string, ((accepted: boolean) => void)[]>();
  let resolveEnded!: (e: Error | undefined) => void;
  const ended = new Promise<Error | undefined>((r) => (resolveEnded = r));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('unexpected-response', (_req, res: IncomingMessage) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => reject(refusal(res.statusCode ?? 0, text)));
      res.on('error', () => reject(refusal(res.statusCode ?? 0, text)));
    });
    socket.once('error', (e: Error & { code?: string }) =>
      reject(
        e.code === 'ECONNRESET' ||
          /socket hang up|Unexpected server response|Invalid Sec-WebSocket-Accept/.test(e.message)
          ? new TransportRefusedError('UPGRADE_REFUSED', `WebSocket upgrade failed: ${e.message}`)
          : new ConnectionError(
              'CONNECTION_FAILED',
              `WebSocket connect failed: ${e.code ?? e.message}`,
              undefined,
              {},
              { cause: e },
            ),
      ),
    );
  });
  socket.on('error', () => undefined);
  socket.on('message', (raw) => {
    const message = JSON.parse(String(raw)) as { type: string; deliveryId: string; accepted?: boolean } & WireDelivery;
    if (message.type === 'event') p.onDelivery({ deliveryId: message.deliveryId, event: message.event });
    else if (message.type === 'answered') {
      const waiting = answers.get(message.deliveryId);
      waiting?.shift()?.(message.accepted === true);
      if (waiting?.length === 0) answers.delete(message.deliveryId);
    }
  });
  let closing = false;
  socket.once('close', (code, reason) => {
    for (const settle of [...answers.values()].flat()) settle(false);
    answers.clear();
    resolveEnded(
      closing ? undefined : new ConnectionError('STREAM_CLOSED', `WebSocket closed (${code} ${reason.toString()})`),
    );
  });
  const connection: Connection = {
    transport: 'websocket',
    ended,
    answer: (a: Answer) =>
      new Promise<boolean>((resolve) => {
        if (socket.readyState !== WebSocket.OPEN) return resolve(false);
        answers.set(a.deliveryId, [...(answers.get(a.deliveryId) ?? []), resolve]);
        socket.send(
          JSON.stringify({
            type: a.action,
            deliveryId: a.deliveryId,
            delayMs: a.delayMs,
            reason: a.reason,
            deadlineMs: a.deadlineMs,
          }),
        );
      }),
    close: () => {
      closing = true;
      socket.close(1000);
    },
  };
  return connection;
};

function refusal(status: number, text: string): Error {
  if (RUNTIME_REFUSALS.includes(status)) return errorOf(status, parseBody(text));
  return new TransportRefusedError('UPGRADE_REFUSED', `WebSocket upgrade answered ${status}`, status, parseBody(text));
}

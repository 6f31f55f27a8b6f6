import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { errorOf, ConnectionError } from '../errors';
import { parseBody } from '../http';
import { BatchParts } from './batch-parts';
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

/** How long a WebSocket handshake may take before the connect fails. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

/** The most an `answers` message carries, in bytes of its JSON (the runtime takes messages of up to 64 KiB). */
const MAX_ANSWERS_BYTES = 48 * 1024;

/**
 * `GET /subscriptions/{id}/ws`: deliveries in as `{type:"event",deliveryId,event}`, answers out on the same
 * socket, each confirmed by `{type:"answered",deliveryId,accepted}`. With `batchFrames` (`?frames=batch`) the
 * deliveries come as `{type:"events",deliveries:[{deliveryId,event}...]}` (a runtime that does not batch sends them
 * one by one), and once the runtime has sent a batch, the answers given in one turn of the event loop leave as one
 * `{type:"answers",answers:[...]}` message, confirmed by one `{type:"answered",answers:[{deliveryId,accepted}...]}`:
 * one message each way per batch, not per delivery. A batched subscription's batch, `{type:"batch",deliveryId,events}`,
 * is one delivery at the runtime: its events are handed over as deliveries of their own and the batch is answered
 * once all of them are (batch-parts.ts). A handshake answered with anything but 101 is the runtime's
 * typed error when it is one of its refusals (`RUNTIME_REFUSALS`); any other answer, or a connection reset during
 * the handshake, means something between refuses upgrades: `TransportRefusedError`.
 */
export const connectWebSocket: Connect = async (p) => {
  // `batches=true`: a batched subscription's batches come whole (batch-parts.ts).
  const query = { ...streamQuery(p), frames: p.batchFrames ? 'batch' : undefined, batches: 'true' };
  const url = p.http.urlOf(streamPath(p, 'ws'), query).replace(/^http/, 'ws');
  // A handshake that hangs fails after HANDSHAKE_TIMEOUT_MS (the consumer connects again), so a close waits that
  // long at most for a connect in flight.
  const socket = new WebSocket(url, { headers: await p.http.authHeaders(), handshakeTimeout: HANDSHAKE_TIMEOUT_MS });
  // The runtime confirms a delivery's answers in the order they were sent (an extension, then the ack, say).
  const answers = new Map<string, ((accepted: boolean) => void)[]>();
  let resolveEnded!: (e: Error | undefined) => void;
  const ended = new Promise<Error | undefined>((r) => (resolveEnded = r));
  // Listening from the start: the runtime sends deliveries as soon as the socket is open, and frames that come in
  // the same read as the handshake's answer are emitted before `open` resolves anything awaiting it.
  socket.on('error', () => undefined);
  const answered = (deliveryId: string, accepted: unknown) => {
    const waiting = answers.get(deliveryId);
    waiting?.shift()?.(accepted === true);
    if (waiting?.length === 0) answers.delete(deliveryId);
  };
  // Set by the first batch: the runtime takes `answers` messages.
  let batched = false;
  // The parts of the batched subscription's batches in hand (their answers are sent by `send`, below).
  const parts = new BatchParts((a) => send(a), p.ackDeadlineMs);
  socket.on('message', (raw) => {
    const message = JSON.parse(String(raw)) as {
      type: string;
      deliveryId: string;
      accepted?: boolean;
      deliveries?: WireDelivery[];
      answers?: { deliveryId: string; accepted: boolean }[];
      events?: WireDelivery['event'][];
      deliveryIds?: string[];
    } & WireDelivery;
    if (message.type === 'batch') {
      batched = true;
      for (const d of parts.split(message.deliveryId, message.events ?? [])) p.onDelivery(d);
    } else if (message.type === 'events') {
      batched = true;
      for (const d of message.deliveries ?? []) p.onDelivery({ deliveryId: d.deliveryId, event: d.event });
    } else if (message.type === 'event') p.onDelivery({ deliveryId: message.deliveryId, event: message.event });
    else if (message.type === 'answered') {
      if (message.answers) for (const a of message.answers) answered(a.deliveryId, a.accepted);
      else answered(message.deliveryId, message.accepted);
    } else if (message.type === 'error') {
      // An answer the runtime refused (it names the deliveries of the message it refused): not taken.
      if (typeof message.deliveryId === 'string') answered(message.deliveryId, false);
      for (const id of message.deliveryIds ?? []) answered(id, false);
    }
  });
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
  const wire = (a: Answer) => ({
    type: a.action,
    deliveryId: a.deliveryId,
    delayMs: a.delayMs,
    reason: a.reason,
    deadlineMs: a.deadlineMs,
  });
  // The answers given in this turn, sent together once it is over.
  let queued: Answer[] | undefined;
  const sendQueued = () => {
    const list = queued!;
    queued = undefined;
    if (socket.readyState !== WebSocket.OPEN) return;
    let chunk: string[] = [];
    let bytes = 0;
    const flush = () => {
      if (chunk.length) socket.send(`{"type":"answers","answers":[${chunk.join(',')}]}`);
      chunk = [];
      bytes = 0;
    };
    for (const a of list) {
      const json = JSON.stringify(wire(a));
      const size = Buffer.byteLength(json) + 1;
      if (bytes + size > MAX_ANSWERS_BYTES) flush();
      chunk.push(json);
      bytes += size;
    }
    flush();
  };
  let closing = false;
  socket.once('close', (code, reason) => {
    for (const settle of [...answers.values()].flat()) settle(false);
    answers.clear();
    parts.close();
    resolveEnded(
      closing ? undefined : new ConnectionError('STREAM_CLOSED', `WebSocket closed (${code} ${reason.toString()})`),
    );
  });
  const send = (a: Answer) =>
    new Promise<boolean>((resolve) => {
      if (socket.readyState !== WebSocket.OPEN) return resolve(false);
      answers.set(a.deliveryId, [...(answers.get(a.deliveryId) ?? []), resolve]);
      if (!batched) return socket.send(JSON.stringify(wire(a)));
      if (queued) return void queued.push(a);
      queued = [a];
      setImmediate(sendQueued);
    });
  const connection: Connection = {
    transport: 'websocket',
    ended,
    answer: (a: Answer) => parts.answer(a) ?? send(a),
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

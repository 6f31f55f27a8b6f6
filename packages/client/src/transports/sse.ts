import { ConnectionError, EventMeshError } from '../errors';
import {
  postAnswer,
  RUNTIME_REFUSALS,
  streamPath,
  streamQuery,
  TransportRefusedError,
  type Connect,
  type WireDelivery,
} from './connection';

/**
 * `GET /subscriptions/{id}/events` (Server-Sent Events): one `cloudevent` message per delivery, answers posted to
 * `/acks`. An answer that is not an event stream, or a status the runtime does not refuse streams with (a proxy that
 * does not pass event streams), is `TransportRefusedError`.
 */
export const connectSse: Connect = async (p) => {
  const aborter = new AbortController();
  const answer = await p.http
    .send({
      method: 'GET',
      path: streamPath(p, 'events'),
      query: streamQuery(p),
      headers: { accept: 'text/event-stream' },
      idempotent: true,
      signal: aborter.signal,
      stream: true,
    })
    .catch((e: unknown) => {
      if (e instanceof EventMeshError && e.status !== undefined && !RUNTIME_REFUSALS.includes(e.status)) {
        throw new TransportRefusedError('SSE_REFUSED', `SSE answered ${e.status}`, e.status, e.body);
      }
      throw e;
    });
  if (!answer.body || !(answer.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    aborter.abort();
    throw new TransportRefusedError(
      'SSE_REFUSED',
      `SSE answered ${answer.status} ${answer.headers.get('content-type') ?? ''}`,
      answer.status,
    );
  }
  const ended = readEvents(answer.body, p.onDelivery).then(
    () => (aborter.signal.aborted ? undefined : new ConnectionError('STREAM_CLOSED', 'SSE stream ended')),
    (e: Error) =>
      aborter.signal.aborted ? undefined : new ConnectionError('STREAM_CLOSED', `SSE stream failed: ${e.message}`),
  );
  return { transport: 'sse', ended, answer: (a) => postAnswer(p, a), close: () => aborter.abort() };
};

/** Reads an event stream to its end, handing each `cloudevent` message's delivery on. */
async function readEvents(body: ReadableStream<Uint8Array>, onDelivery: (d: WireDelivery) => void): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const message = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const lines = message.split('\n');
      if (!lines.includes('event: cloudevent')) continue;
      const data = lines
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      onDelivery(JSON.parse(data) as WireDelivery);
    }
  }
}

import { ConnectionError } from '../errors';
import { postAnswer, streamPath, streamQuery, type Connect, type ConnectParams, type WireDelivery } from './connection';

const WAIT_MS = 20000;

/**
 * `GET /subscriptions/{id}/poll`: the consumer polls again as soon as an answer came, under one consumer name, so
 * the runtime keeps what it holds between polls. The connection is up once a poll was answered; it ends at the
 * first failed poll (the consumer then reconnects). Closing stops polling and disconnects the name
 * (`DELETE .../clients/poll:<name>`, best effort) so what it held is delivered again at once.
 */
export const connectLongPoll: Connect = async (p) => {
  const aborter = new AbortController();
  const first = await poll(p, aborter.signal, 0);
  for (const d of first) p.onDelivery(d);
  const ended = (async (): Promise<Error | undefined> => {
    try {
      while (!aborter.signal.aborted) for (const d of await poll(p, aborter.signal, WAIT_MS)) p.onDelivery(d);
      return undefined;
    } catch (e) {
      return aborter.signal.aborted
        ? undefined
        : new ConnectionError('STREAM_CLOSED', `long-poll failed: ${(e as Error).message}`);
    }
  })();
  return {
    transport: 'long-poll',
    ended,
    answer: (a) => postAnswer(p, a),
    close: () => {
      aborter.abort();
      void p.http
        .send({
          method: 'DELETE',
          path: streamPath(p, `clients/poll:${encodeURIComponent(p.consumerName)}`),
          idempotent: true,
        })
        .catch(() => undefined);
    },
  };
};

async function poll(p: ConnectParams, signal: AbortSignal, waitMs: number): Promise<WireDelivery[]> {
  const answer = await p.http.send({
    method: 'GET',
    path: streamPath(p, 'poll'),
    query: { ...streamQuery(p), consumer: p.consumerName, max: p.window, waitMs },
    idempotent: true,
    signal,
  });
  return (JSON.parse(answer.text) as { deliveries: WireDelivery[] }).deliveries;
}

import net from 'node:net';
import tls from 'node:tls';
import type { ISocketFactory } from 'kafkajs';
import { createLogger } from '@libs/logging';

/** The TCP keep-alive kafkajs's own socket factory sets; kept as it is. */
const KEEP_ALIVE_DELAY_MS = 60000;

const log = createLogger('KafkaLink');

/**
 * kafkajs's socket factory (the same plain or TLS socket, the same keep-alive) with each connection watched for a
 * link gone silent: a request was written and nothing at all came back for `silenceMs`. kafkajs times such a
 * request out but keeps the connection, and a connection whose peer vanished without a reset (a partition that
 * drops packets, a NAT that forgot it, a broker that never serves a connection it accepted while starting) answers
 * nothing again: every later request on it (a produce, a fetch) times out too, until TCP keep-alive gives up on it
 * minutes later. A silent connection is destroyed instead; kafkajs fails what was pending on it and opens a new
 * connection for the next request. `silenceMs` is a little more than the client's request timeout: every request
 * the runtime sends is answered within that timeout (a produce waits for its acknowledgements at most that long, a
 * fetch much less), so a connection that said nothing for longer after a request has none in flight kafkajs still
 * waits for.
 */
export function socketFactoryDroppingSilentLinks(silenceMs: number): ISocketFactory {
  return ({ host, port, ssl, onConnect }) => {
    const socket = ssl
      ? tls.connect({ host, port, ...(net.isIP(host) ? {} : { servername: host }), ...ssl }, onConnect)
      : net.connect({ host, port }, onConnect);
    socket.setKeepAlive(true, KEEP_ALIVE_DELAY_MS);
    dropWhenSilent(socket, silenceMs, () =>
      log.warn(
        { broker: `${host}:${port}`, silenceMs },
        'no answer on a Kafka connection since a request was written to it; dropping it',
      ),
    );
    return socket;
  };
}

/**
 * Destroys `socket` once bytes were written to it and none came back for `silenceMs`. Checked a few times per
 * `silenceMs` from the socket's byte counters (no wrapping of its methods); the check ends with the socket.
 */
export function dropWhenSilent(socket: net.Socket, silenceMs: number, onDrop: () => void): void {
  let read = 0;
  let writtenAtRead = 0;
  /** Since when something written waits for its first byte back (0: nothing waits). */
  let waitingSince = 0;
  const check = setInterval(
    () => {
      if (socket.bytesRead !== read) {
        read = socket.bytesRead;
        writtenAtRead = socket.bytesWritten;
        waitingSince = 0;
        return;
      }
      if (socket.bytesWritten === writtenAtRead) return;
      const now = Date.now();
      if (waitingSince === 0) waitingSince = now;
      else if (now - waitingSince >= silenceMs) {
        clearInterval(check);
        onDrop();
        socket.destroy(
          new Error(`no answer within ${silenceMs} ms on a connection a request was written to; dropped as silent`),
        );
      }
    },
    Math.max(10, Math.floor(silenceMs / 8)),
  );
  check.unref();
  socket.once('close', () => clearInterval(check));
}

import { WebSocket } from 'ws';
import { CLUSTER_TOKEN_HEADER, HOLDER_QUERY } from './cluster-channel';
import type { ClusterCredential } from './cluster-credential';

const HANDSHAKE_TIMEOUT_MS = 3000;
/** Handshakes that met another process of the holder's instance (421) before giving up for this round. */
const MISDIRECTED_TRIES = 32;

export interface DialTarget {
  /** The holder's base URL (its advertised address). */
  address: string;
  /** The gateway process to reach, `<instance id>/<pid>`. */
  holder: string;
}

/**
 * Opens an internal WebSocket from this process (`self`) to the gateway process `holder` at `path`, with a cluster
 * token made for that process (cluster-credential.ts). Several gateway processes of one instance share its port:
 * a handshake that reaches another one is answered 421 and made again, up to {@link MISDIRECTED_TRIES} times.
 * Rejects on any other refusal or failure. The stream channel and the sessions link both dial this way.
 */
export async function dialHolder(
  to: DialTarget,
  path: string,
  credential: ClusterCredential,
  self: string,
  maxPayload: number,
): Promise<WebSocket> {
  const url = `${to.address.replace(/^http/, 'ws')}${path}?${HOLDER_QUERY}=${encodeURIComponent(to.holder)}`;
  for (let attempt = 1; ; attempt++) {
    const result = await new Promise<WebSocket | 'misdirected'>((resolve, reject) => {
      const socket = new WebSocket(url, {
        headers: { [CLUSTER_TOKEN_HEADER]: credential.sign(self, to.holder) },
        handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
        maxPayload,
      });
      socket.once('open', () => resolve(socket));
      socket.once('unexpected-response', (_request, response) => {
        socket.terminate();
        if (response.statusCode === 421) resolve('misdirected');
        else reject(new Error(`the handshake was answered ${response.statusCode}`));
      });
      socket.once('error', reject);
    });
    if (result !== 'misdirected') return result;
    if (attempt >= MISDIRECTED_TRIES)
      throw new Error(`${MISDIRECTED_TRIES} handshakes met other processes of the holder's instance`);
  }
}

/**
 * Pings `socket` every `intervalMs`; one that showed no sign of life within the interval is terminated (a silent peer:
 * a dead process whose connection the OS never closed), after `onSilent`. A sign of life is a pong, or any bytes read
 * from the peer: a ping queued behind a long write to a slow reader is answered late, though the reader is alive and
 * talking (bytes written are no sign: the kernel takes them from a dead peer too, until its buffer is full).
 * Returns the stop (also done on close).
 */
export function keepAlive(socket: WebSocket, intervalMs: number, onSilent?: () => void): () => void {
  let alive = true;
  let read = bytesRead(socket);
  const pong = () => (alive = true);
  socket.on('pong', pong);
  const timer = setInterval(() => {
    const now = bytesRead(socket);
    if (now !== read) alive = true;
    read = now;
    if (!alive) {
      onSilent?.();
      socket.terminate();
      return;
    }
    alive = false;
    if (socket.readyState === WebSocket.OPEN) socket.ping();
  }, intervalMs);
  timer.unref();
  const stop = () => {
    clearInterval(timer);
    socket.off('pong', pong);
  };
  socket.once('close', stop);
  return stop;
}

/** Bytes the socket's TCP connection has read (ws keeps it as `_socket`); 0 without one. */
function bytesRead(socket: WebSocket): number {
  return (socket as unknown as { _socket?: { bytesRead?: number } | null })._socket?.bytesRead ?? 0;
}

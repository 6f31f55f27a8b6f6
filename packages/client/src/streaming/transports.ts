import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { ConnectionError, errorOf, EventMeshError } from '../errors';
import { parseBody, type HttpClient } from '../http';
import { RUNTIME_REFUSALS, TransportRefusedError } from '../transports/connection';

/** How the sessions connection reaches the runtime: its WebSocket, or Server-Sent Events and POSTs (the fallback). */
export interface FrameTransport {
  readonly kind: 'websocket' | 'sse';
  readonly open: boolean;
  /** Sends a frame (in order); false when the transport is closed. */
  send(raw: Buffer): boolean;
  close(): void;
}

export interface TransportEvents {
  frame(raw: Buffer): void;
  /** The transport closed: `code` 1001 when the runtime is shutting down, `closed` when this side closed it. */
  closed(code: number, reason: string): void;
}

/**
 * `GET /sessions/ws`. A handshake answered by the runtime's own refusals (RUNTIME_REFUSALS) is its typed error; any
 * other answer, or a reset during the handshake, means something between refuses upgrades: TransportRefusedError.
 * Alive while a pong or any bytes come back within each `heartbeatMs`.
 */
export async function connectWebSocket(
  http: HttpClient,
  heartbeatMs: number,
  on: TransportEvents,
): Promise<FrameTransport> {
  const url = http.urlOf('/sessions/ws').replace(/^http/, 'ws');
  const socket = new WebSocket(url, {
    headers: await http.authHeaders(),
    maxPayload: 256 * 1024 * 1024,
    handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('unexpected-response', (_req, res: IncomingMessage) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      const refused = () => {
        const status = res.statusCode ?? 0;
        reject(
          RUNTIME_REFUSALS.includes(status)
            ? errorOf(status, parseBody(text))
            : new TransportRefusedError('UPGRADE_REFUSED', `WebSocket upgrade answered ${status}`, status),
        );
      };
      res.on('end', refused);
      res.on('error', refused);
    });
    socket.once('error', (e: Error & { code?: string }) =>
      reject(
        e.code === 'ECONNRESET' || /socket hang up|Unexpected server response|handshake has timed out/.test(e.message)
          ? new TransportRefusedError('UPGRADE_REFUSED', `WebSocket upgrade failed: ${e.message}`, undefined, {
              reset: true,
            })
          : new ConnectionError(
              'CONNECTION_FAILED',
              `sessions connect failed: ${e.code ?? e.message}`,
              undefined,
              {},
              {
                cause: e,
              },
            ),
      ),
    );
  });
  socket.on('error', () => undefined);
  // Alive: a pong, or anything read from the runtime (a pong queued behind chunks comes late, the runtime is fine).
  let alive = true;
  let read = 0;
  socket.on('pong', () => (alive = true));
  const heartbeat = setInterval(() => {
    const now = (socket as unknown as { _socket?: { bytesRead?: number } | null })._socket?.bytesRead ?? 0;
    if (now !== read) alive = true;
    read = now;
    if (!alive) return socket.terminate();
    alive = false;
    socket.ping();
  }, heartbeatMs);
  heartbeat.unref();
  let closing = false;
  socket.on('message', (raw: Buffer) => on.frame(raw));
  socket.once('close', (code, reason) => {
    clearInterval(heartbeat);
    on.closed(closing ? 1000 : code, closing ? 'closed' : reason.toString());
  });
  return {
    kind: 'websocket',
    get open() {
      return socket.readyState === WebSocket.OPEN;
    },
    send: (raw) => {
      if (socket.readyState !== WebSocket.OPEN) return false;
      socket.send(raw);
      return true;
    },
    close: () => {
      closing = true;
      socket.close(1000);
    },
  };
}

/** How long a WebSocket handshake may take (a proxy that holds an upgrade it does not pass must not hang the client). */
const HANDSHAKE_TIMEOUT_MS = 10_000;

/** The most bytes of frames one POST carries (below the runtime's default body limit of 1 MiB). */
const MAX_POST_BYTES = 512 * 1024;

/**
 * The fallback: `GET /sessions/sse` streams the frames (base64, one `frame` event each; the first event names the
 * connection), and frames go out in POSTs to `/sessions/sse/frames?connection=...`, one at a time so that they stay in
 * order, each carrying what was sent meanwhile (each frame after its length, a u32). A failed POST, or a stream with
 * nothing read for two heartbeats (the runtime sends a comment every one), closes the transport.
 */
export async function connectSse(http: HttpClient, heartbeatMs: number, on: TransportEvents): Promise<FrameTransport> {
  const aborter = new AbortController();
  const answer = await http
    .send({
      method: 'GET',
      path: '/sessions/sse',
      headers: { accept: 'text/event-stream' },
      idempotent: true,
      signal: aborter.signal,
      stream: true,
    })
    .catch((e: unknown) => {
      if (e instanceof EventMeshError && e.status !== undefined && !RUNTIME_REFUSALS.includes(e.status))
        throw new TransportRefusedError('SSE_REFUSED', `SSE answered ${e.status}`, e.status, e.body);
      throw e;
    });
  if (!answer.body || !(answer.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    aborter.abort();
    throw new TransportRefusedError('SSE_REFUSED', `SSE answered ${answer.status}`, answer.status);
  }
  let token: string | undefined;
  let named!: () => void;
  const connected = new Promise<void>((resolve) => (named = resolve));
  let closed = false;
  let lastRead = Date.now();
  const close = (code: number, reason: string) => {
    if (closed) return;
    closed = true;
    clearInterval(watch);
    aborter.abort();
    on.closed(code, reason);
  };
  const watch = setInterval(() => {
    if (Date.now() - lastRead > 2 * heartbeatMs) close(1006, 'the event stream went silent');
  }, heartbeatMs);
  watch.unref();
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of answer.body as unknown as AsyncIterable<Uint8Array>) {
        lastRead = Date.now();
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const lines = buffer.slice(0, end).split('\n');
          buffer = buffer.slice(end + 2);
          const data = lines
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trimStart())
            .join('');
          if (lines.includes('event: frame')) on.frame(Buffer.from(data, 'base64'));
          else if (lines.includes('event: connection')) {
            token = (JSON.parse(data) as { connection: string }).connection;
            named();
          }
        }
      }
      close(1006, 'the event stream ended');
    } catch (e) {
      close(1006, `the event stream failed: ${(e as Error).message}`);
    }
  })();
  await Promise.race([connected, new Promise((r) => setTimeout(r, 10 * heartbeatMs).unref())]);
  if (!token) {
    close(1006, 'the event stream named no connection');
    throw new ConnectionError('CONNECTION_FAILED', 'the sessions event stream named no connection');
  }
  const queue: Buffer[] = [];
  let posting = false;
  const flush = async () => {
    if (posting || closed) return;
    posting = true;
    try {
      while (queue.length > 0 && !closed) {
        const parts: Buffer[] = [];
        let bytes = 0;
        while (queue.length > 0 && (parts.length === 0 || bytes + queue[0].length + 4 <= MAX_POST_BYTES)) {
          const raw = queue.shift()!;
          const length = Buffer.alloc(4);
          length.writeUInt32BE(raw.length, 0);
          parts.push(length, raw);
          bytes += raw.length + 4;
        }
        await http.send({
          method: 'POST',
          path: '/sessions/sse/frames',
          query: { connection: token },
          headers: { 'content-type': 'application/octet-stream' },
          body: Buffer.concat(parts),
          // Not sent twice on a reset: frames (a request) must not repeat.
          idempotent: false,
        });
      }
    } catch (e) {
      close(1006, `a post of frames failed: ${(e as Error).message}`);
    } finally {
      posting = false;
    }
  };
  return {
    kind: 'sse',
    get open() {
      return !closed;
    },
    send: (raw) => {
      if (closed) return false;
      queue.push(raw);
      if (queue.length === 1) setImmediate(() => void flush());
      return true;
    },
    close: () => close(1000, 'closed'),
  };
}

import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { WebSocket } from 'ws';
import { createLogger } from '@libs/logging';
import type { Caller } from '@libs/security';
import { keepAlive, sendInTurn, writeInTurn } from '@libs/streams';

const log = createLogger('SessionConnection');

/** Who opened a connection, as its handshake passed the gate: every operation on it passes the gate again. */
export interface ConnectionIdentity {
  caller: Caller;
  headers: Record<string, string | string[] | undefined>;
  remoteAddress: string;
}

/** How frames reach a client: its WebSocket, or (the fallback) a Server-Sent Events stream. */
export interface SessionTransport {
  readonly kind: 'websocket' | 'sse';
  readonly open: boolean;
  /** Bytes written and not yet sent. */
  readonly buffered: number;
  send(raw: Buffer): void;
  close(code: number, reason: string): void;
}

/** A client's WebSocket: a binary message per frame, pinged every heartbeat (silent for a whole period: closed). */
export function webSocketTransport(socket: WebSocket, heartbeatMs: number, who: () => string): SessionTransport {
  keepAlive(socket, heartbeatMs, () =>
    log.warn(
      { connection: who(), buffered: socket.bufferedAmount },
      'sessions connection went silent (no pong, nothing read for a heartbeat); closing it',
    ),
  );
  return {
    kind: 'websocket',
    get open() {
      return socket.readyState === WebSocket.OPEN;
    },
    get buffered() {
      return socket.bufferedAmount;
    },
    send: (raw) => sendInTurn(socket, raw),
    close: (code, reason) => {
      if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING)
        socket.close(code, reason);
    },
  };
}

/**
 * A client's Server-Sent Events stream (the fallback where a WebSocket does not get through): one `frame` event per
 * frame, its bytes in base64, and a comment every heartbeat so that proxies keep it open. The client posts its frames
 * (session-server.ts); the stream ends when its connection closes.
 */
export function sseTransport(response: ServerResponse, heartbeatMs: number): SessionTransport {
  const ping = setInterval(() => response.write(': ping\n\n'), heartbeatMs);
  ping.unref();
  response.once('close', () => clearInterval(ping));
  return {
    kind: 'sse',
    get open() {
      return !response.writableEnded && !response.destroyed;
    },
    get buffered() {
      return response.writableLength;
    },
    send: (raw) => writeInTurn(response, () => response.write(`event: frame\ndata: ${raw.toString('base64')}\n\n`)),
    close: () => response.end(),
  };
}

/**
 * One client's connection (an SDK's `client.streaming()`): every session it opens, every agent name it serves and
 * every Mode 2 publisher and subscription it holds are multiplexed over it. What it holds is kept by the server, so
 * that its end ends all of it (session-server.ts).
 */
export class SessionConnection {
  readonly id = randomUUID();
  readonly since = new Date();
  private ended = false;

  constructor(
    private readonly transport: SessionTransport,
    readonly identity: ConnectionIdentity,
  ) {}

  get tenant(): string {
    return this.identity.caller.tenant;
  }

  get open(): boolean {
    return !this.ended && this.transport.open;
  }

  /** Bytes written to the client and not yet sent (the runtime's own buffer of this connection). */
  get buffered(): number {
    return this.transport.buffered;
  }

  get transportKind(): SessionTransport['kind'] {
    return this.transport.kind;
  }

  /** Sends one frame; dropped when the connection is closing (its sessions are being ended). */
  send(raw: Buffer): void {
    if (this.open) this.transport.send(raw);
  }

  /** Closes it (close code 1001 at shutdown, 1008 for a protocol violation). */
  close(code = 1000, reason = ''): void {
    this.ended = true;
    this.transport.close(code, reason);
  }

  /** Marks it ended (its transport closed): nothing more is sent. */
  markEnded(): void {
    this.ended = true;
  }
}

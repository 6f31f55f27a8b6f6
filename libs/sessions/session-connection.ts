import { randomUUID } from 'node:crypto';
import { WebSocket } from 'ws';
import type { Caller } from '../security';
import { createLogger } from '../logging';
import { keepAlive, sendInTurn } from '../streams';

const log = createLogger('SessionConnection');

/** Who opened a connection, as its handshake passed the gate: every operation on it passes the gate again. */
export interface ConnectionIdentity {
  caller: Caller;
  headers: Record<string, string | string[] | undefined>;
  remoteAddress: string;
}

/**
 * One client's WebSocket to `/sessions/ws` (an SDK's `client.streaming()`): every session it opens, every agent
 * name it serves and every Mode 2 publisher and subscription it holds are multiplexed over it, one binary session
 * frame per message. What it holds is kept here so that its end ends all of it (session-server.ts). Pinged every
 * heartbeat; silent for a whole period, it is closed.
 */
export class SessionConnection {
  readonly id = randomUUID();
  readonly since = new Date();
  private ended = false;

  constructor(
    private readonly socket: WebSocket,
    readonly identity: ConnectionIdentity,
    heartbeatMs: number,
  ) {
    keepAlive(socket, heartbeatMs, () =>
      log.warn(
        { connection: this.id, tenant: identity.caller.tenant, buffered: socket.bufferedAmount },
        'sessions connection went silent (no pong, nothing read for a heartbeat); closing it',
      ),
    );
  }

  get tenant(): string {
    return this.identity.caller.tenant;
  }

  get open(): boolean {
    return !this.ended && this.socket.readyState === WebSocket.OPEN;
  }

  /** Bytes written to the socket and not yet sent (the runtime's own buffer of this connection). */
  get buffered(): number {
    return this.socket.bufferedAmount;
  }

  /** Sends one frame; dropped when the connection is closing (its sessions are being ended). */
  send(raw: Buffer): void {
    if (this.open) sendInTurn(this.socket, raw);
  }

  /** Closes it (close code 1001 at shutdown, 1008 for a protocol violation). */
  close(code = 1000, reason = ''): void {
    this.ended = true;
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING)
      this.socket.close(code, reason);
  }

  /** Marks it ended (its socket closed): nothing more is sent. */
  markEnded(): void {
    this.ended = true;
  }
}

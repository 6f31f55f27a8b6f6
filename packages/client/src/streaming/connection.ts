import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { ConnectionError, errorOf, EventMeshError } from '../errors';
import { parseBody, type HttpClient } from '../http';
import { SessionClosedError } from './errors';
import { decodeFrame, encodeFrame, type Frame } from './frame';

/** What reads the frames of one session or one served agent on the connection. */
export interface FrameReader {
  frame(frame: Frame): void;
  /** The connection was lost (or closed): whatever it held on it is over. */
  lost(error: EventMeshError): void;
}

/** A served agent, told again when the connection comes back (it serves its name again). */
export interface ServedReader extends FrameReader {
  reconnected(): void;
}

export interface StreamingOptions {
  /** How often the connection is pinged; unanswered for a period, it is closed (default 15 000 ms). */
  heartbeatMs?: number;
  /** The first wait before connecting again while agents are served (default 250 ms; doubles up to 10 s, with jitter). */
  reconnectMs?: number;
}

const MAX_RECONNECT_MS = 10_000;

/** The agent a session id names (`<agent>:<uuid>`), or the id itself (a serve's frames carry the agent name). */
const agentOf = (id: string): string => {
  const at = id.indexOf(':');
  return at < 0 ? id : id.slice(0, at);
};

/**
 * The client's one WebSocket to `/sessions/ws`, opened on first use: every session it opens and every agent name it
 * serves are multiplexed over it. Frames for a session's caller go to the session by id; frames for a served agent
 * (an open, a request, a cancel, credit, a close) to the agent by the name the id starts with. Lost, every session on
 * it ends (`SessionClosedError`), and while agents are served it connects again, with backoff, and serves them again.
 */
export class SessionConnection {
  /** Sessions opened as a caller (by id), and session subscriptions (by the session's name). */
  readonly callers = new Map<string, FrameReader>();
  /** Session publishers, by id. */
  readonly publishers = new Map<string, FrameReader>();
  readonly served = new Map<string, ServedReader>();
  /** What takes up again when the connection comes back (session subscriptions). */
  readonly resumable = new Set<{ reconnected(): void }>();
  private socket?: WebSocket;
  private connecting?: Promise<WebSocket>;
  private closed = false;
  private reconnectDelay: number;
  private reconnectTimer?: NodeJS.Timeout;

  constructor(
    private readonly http: HttpClient,
    private readonly options: StreamingOptions = {},
  ) {
    this.reconnectDelay = options.reconnectMs ?? 250;
  }

  get isOpen(): boolean {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  /** Connects when it is not; rejects with the runtime's typed refusal (AuthError, UnavailableError...) or a ConnectionError. */
  ensure(): Promise<void> {
    if (this.closed) return Promise.reject(new SessionClosedError('SESSION_CLOSED', 'streaming is closed'));
    if (this.socket?.readyState === WebSocket.OPEN) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting.then(() => undefined);
  }

  /** Sends a frame; false when the connection is not open (what it was for is being ended). */
  send(raw: Buffer): boolean {
    if (this.socket?.readyState !== WebSocket.OPEN) return false;
    this.socket.send(raw);
    return true;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.socket?.close(1000);
  }

  private async connect(): Promise<WebSocket> {
    const url = this.http.urlOf('/sessions/ws').replace(/^http/, 'ws');
    const socket = new WebSocket(url, { headers: await this.http.authHeaders(), maxPayload: 256 * 1024 * 1024 });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('unexpected-response', (_req, res: IncomingMessage) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => reject(errorOf(res.statusCode ?? 0, parseBody(text))));
        res.on('error', () => reject(errorOf(res.statusCode ?? 0, parseBody(text))));
      });
      socket.once('error', (e: Error & { code?: string }) =>
        reject(
          new ConnectionError(
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
    if (this.closed) {
      socket.close(1000);
      throw new SessionClosedError('SESSION_CLOSED', 'streaming is closed');
    }
    this.socket = socket;
    this.reconnectDelay = this.options.reconnectMs ?? 250;
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
    }, this.options.heartbeatMs ?? 15_000);
    heartbeat.unref();
    socket.on('message', (raw: Buffer) => {
      const frame = decodeFrame(raw);
      if (frame) this.route(frame);
    });
    socket.once('close', (code, reason) => {
      clearInterval(heartbeat);
      if (this.socket === socket) this.socket = undefined;
      const why = reason.toString();
      const error = new SessionClosedError(
        this.closed ? 'SESSION_CLOSED' : code === 1001 ? 'SHUTTING_DOWN' : 'CONNECTION_LOST',
        this.closed ? 'streaming was closed' : `the sessions connection closed (${code}${why ? ` ${why}` : ''})`,
        undefined,
        { closeCode: code },
      );
      for (const reader of [...this.callers.values(), ...this.publishers.values()]) reader.lost(error);
      this.callers.clear();
      this.publishers.clear();
      for (const reader of this.served.values()) reader.lost(error);
      this.scheduleReconnect();
    });
    return socket;
  }

  private route(frame: Frame): void {
    switch (frame.kind) {
      case 'opened':
        (this.callers.get(frame.id) ?? this.publishers.get(frame.id))?.frame(frame);
        return;
      case 'chunk':
      case 'end':
      case 'subscribed':
      case 'presence':
        this.callers.get(frame.id)?.frame(frame);
        return;
      case 'served':
        this.served.get(frame.id)?.frame(frame);
        return;
      case 'credit':
        (this.publishers.get(frame.id) ?? this.served.get(agentOf(frame.id)))?.frame(frame);
        return;
      case 'error':
        // A caller's session or subscription, a publisher, a serve refused (its id the agent name), or a session of
        // a served agent: each that matches hears of it.
        this.callers.get(frame.id)?.frame(frame);
        this.publishers.get(frame.id)?.frame(frame);
        this.served.get(agentOf(frame.id))?.frame(frame);
        return;
      default: {
        const agent = this.served.get(agentOf(frame.id));
        if (agent) agent.frame(frame);
        // A session bound to an agent this client no longer serves: ended back, so its caller is not left waiting.
        else if (frame.kind === 'open' || frame.kind === 'request')
          this.send(encodeFrame({ kind: 'close', id: frame.id }));
      }
    }
  }

  /**
   * While agents are served or subscriptions wait to resume, connects again (with backoff and jitter); then the agents
   * serve their names again and the subscriptions resume from their positions.
   */
  private scheduleReconnect(): void {
    if (this.closed || (this.served.size === 0 && this.resumable.size === 0)) return;
    const delay = this.reconnectDelay * (0.5 + Math.random());
    this.reconnectDelay = Math.min(MAX_RECONNECT_MS, this.reconnectDelay * 2);
    this.reconnectTimer = setTimeout(() => {
      this.ensure().then(
        () => {
          for (const reader of this.served.values()) reader.reconnected();
          for (const reader of [...this.resumable]) reader.reconnected();
        },
        () => this.scheduleReconnect(),
      );
    }, delay);
    // Not unref'd: an agent's process lives to serve, and must not end while its connection is being made again.
  }
}

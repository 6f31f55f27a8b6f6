import type { EventMeshError } from '../errors';
import type { HttpClient } from '../http';
import { TransportRefusedError } from '../transports/connection';
import { SessionClosedError } from './errors';
import { decodeFrame, encodeFrame, type Frame } from './frame';
import { connectSse, connectWebSocket, type FrameTransport, type TransportEvents } from './transports';
import { checkWhole } from '../option-checks';

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
  /**
   * `auto` (the default): a WebSocket, and Server-Sent Events with POSTs where something between refuses the upgrade;
   * or only one of them.
   */
  transport?: 'auto' | 'websocket' | 'sse';
}

const MAX_RECONNECT_MS = 10_000;
/** The longest timer Node keeps (a longer one fires after 1 ms). */
const MAX_TIMER_MS = 2_147_483_647;

/** Options that would make the connection spin or flap, refused when it is made (a `RangeError`). */
function checkStreamingOptions(o: StreamingOptions): void {
  checkWhole('heartbeatMs', o.heartbeatMs, 1, MAX_TIMER_MS);
  checkWhole('reconnectMs', o.reconnectMs, 1, MAX_RECONNECT_MS);
  if (o.transport !== undefined && !['auto', 'websocket', 'sse'].includes(o.transport))
    throw new RangeError(`transport must be 'auto', 'websocket' or 'sse', not ${String(o.transport)}`);
}

/** The agent a session id names (`<agent>:<uuid>`), or the id itself (a serve's frames carry the agent name). */
const agentOf = (id: string): string => {
  const at = id.indexOf(':');
  return at < 0 ? id : id.slice(0, at);
};

/**
 * The client's one connection to the runtime's sessions (a WebSocket to `/sessions/ws`, or the SSE + POST fallback),
 * opened on first use: every session it opens and every agent name it
 * serves are multiplexed over it. Frames for a session's caller go to the session by id; frames for a served agent
 * (an open, a request, a cancel, credit, a close) to the agent by the name the id starts with. Lost, every session on
 * it ends (`SessionClosedError`), and while agents are served it connects again, with backoff, and serves them again.
 */
/** How long a connection must have lasted for the reconnect backoff after it to start from its first delay. */
const STABLE_CONNECTION_MS = 5000;

export class SessionConnection {
  /** Sessions opened as a caller (by id), and session subscriptions (by the session's name). */
  readonly callers = new Map<string, FrameReader>();
  /** Session publishers, by id. */
  readonly publishers = new Map<string, FrameReader>();
  readonly served = new Map<string, ServedReader>();
  /** What takes up again when the connection comes back (session subscriptions). */
  readonly resumable = new Set<{ reconnected(): void; lost(error: EventMeshError): void }>();
  private transport?: FrameTransport;
  /** A WebSocket got through once: a later reset during a handshake is no reason to fall back. */
  private webSocketWorked = false;
  private connecting?: Promise<FrameTransport>;
  private closed = false;
  private reconnectDelay: number;
  private reconnectTimer?: NodeJS.Timeout;
  /** When the transport in use connected. */
  private connectedAt = 0;

  constructor(
    private readonly http: HttpClient,
    private readonly options: StreamingOptions = {},
  ) {
    checkStreamingOptions(options);
    this.reconnectDelay = options.reconnectMs ?? 250;
  }

  get isOpen(): boolean {
    return this.transport?.open === true;
  }

  /** How the connection reaches the runtime now (undefined while it is not connected). */
  get transportKind(): FrameTransport['kind'] | undefined {
    return this.transport?.open ? this.transport.kind : undefined;
  }

  /** Connects when it is not; rejects with the runtime's typed refusal (AuthError, UnavailableError...) or a ConnectionError. */
  ensure(): Promise<void> {
    if (this.closed) return Promise.reject(new SessionClosedError('SESSION_CLOSED', 'streaming is closed'));
    if (this.transport?.open) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting.then(() => undefined);
  }

  /** Sends a frame; false when the connection is not open (what it was for is being ended). */
  send(raw: Buffer): boolean {
    return this.transport?.send(raw) ?? false;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    if (this.transport) return this.transport.close();
    // No transport (lost, waiting to connect again): no close event will come, so what waits for one ends here.
    this.lostConnection(1000, 'closed');
  }

  private async connect(): Promise<FrameTransport> {
    const heartbeatMs = this.options.heartbeatMs ?? 15_000;
    let transport: FrameTransport | undefined;
    const events: TransportEvents = {
      frame: (raw) => {
        const frame = decodeFrame(raw);
        if (frame) this.route(frame);
      },
      closed: (code, reason) => {
        if (transport && this.transport === transport) this.transport = undefined;
        this.lostConnection(code, reason);
      },
    };
    const mode = this.options.transport ?? 'auto';
    if (mode === 'sse') transport = await connectSse(this.http, heartbeatMs, events);
    else {
      try {
        transport = await connectWebSocket(this.http, heartbeatMs, events);
        this.webSocketWorked = true;
      } catch (e) {
        // A WebSocket that does not get through (a proxy refusing upgrades): the SSE + POST fallback. A reset where a
        // WebSocket worked before is a network blip, not a proxy: connecting again is the answer.
        const refused = e instanceof TransportRefusedError && !(this.webSocketWorked && e.body.reset === true);
        if (mode === 'websocket' || !refused) throw e;
        transport = await connectSse(this.http, heartbeatMs, events);
      }
    }
    if (this.closed) {
      transport.close();
      throw new SessionClosedError('SESSION_CLOSED', 'streaming is closed');
    }
    this.transport = transport;
    this.connectedAt = Date.now();
    return transport;
  }

  /** The transport closed: what it carried ends; served agents and subscriptions wait for the next connection. */
  private lostConnection(code: number, why: string): void {
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
    // Closed: the subscriptions waiting for the connection to come back (no longer callers) end too.
    if (this.closed) for (const reader of [...this.resumable]) reader.lost(error);
    // The backoff starts again only after a connection that lasted: one the runtime accepts and drops at once (a
    // restart loop, a proxy) is taken up again at the growing backoff, not every few hundred milliseconds.
    if (Date.now() - this.connectedAt >= STABLE_CONNECTION_MS) this.reconnectDelay = this.options.reconnectMs ?? 250;
    this.scheduleReconnect();
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
    // One reconnect at a time: a second timer would tell the agents and subscriptions twice (served twice, subscribed
    // twice: the runtime refuses the second subscription, SESSION_EXISTS, which ended it).
    if (this.reconnectTimer) return;
    const delay = this.reconnectDelay * (0.5 + Math.random());
    this.reconnectDelay = Math.min(MAX_RECONNECT_MS, this.reconnectDelay * 2);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
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

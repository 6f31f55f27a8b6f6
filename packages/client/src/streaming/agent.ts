import type { EventMeshError } from '../errors';
import type { ServedReader, SessionConnection } from './connection';
import { callBack } from './callback';
import { ChunkTooLargeError, SessionCancelledError, SessionClosedError, sessionErrorOf } from './errors';
import { encodeFrame, type Frame } from './frame';

/** What an agent's handler is called with. */
export interface CallRequest {
  /** The session (`<agent>:<uuid>`): a session's calls all come to this replica, one at a time. */
  session: string;
  /** The call's number in its session. */
  call: number;
  /** The calling principal, as the runtime's gate knows it. */
  caller: string;
  data: Buffer;
  text(): string;
  json<T = unknown>(): T;
}

export interface CallContext {
  /**
   * Sends one chunk of the answer (a string is sent as UTF-8). Resolves once the reader has credit for it: a slow
   * reader slows the handler here. Rejects with `ChunkTooLargeError` above the session's largest chunk, and with the
   * abort reason once the call is cancelled or its session is over.
   */
  send(chunk: string | Uint8Array): Promise<void>;
  /**
   * Aborts when the caller cancels the call (reason: `SessionCancelledError`, its `body.reason` `cancelled`), goes
   * away (the same, `disconnected`), or the session ends otherwise (`SessionClosedError`, `AgentGoneError`...).
   */
  signal: AbortSignal;
}

/** An agent's handler: the call's answer is what it sends; returning ends the call, throwing fails it (`AgentCallError`). */
export type AgentHandler = (request: CallRequest, context: CallContext) => unknown;

export interface ServeOptions {
  /** Told when the replica serves, loses its connection (and connects again), or is closed. */
  onStateChange?: (state: AgentServer['state'], error?: EventMeshError) => void;
}

interface Waiter {
  frame: Buffer;
  bytes: number;
  resolve(): void;
  reject(e: unknown): void;
}

/** One session bound to this replica: its credit, the call under way, the sends waiting for credit. */
class AgentSession {
  credit: number;
  readonly waiters: Waiter[] = [];
  running?: { call: number; abort: AbortController; done: Promise<void> };

  constructor(
    readonly id: string,
    readonly maxChunk: number,
    readonly caller: string,
    window: number,
  ) {
    this.credit = window;
  }
}

/**
 * A replica of an agent (`streaming.serve(agentId, handler)`): the runtime binds sessions to it and hands it their
 * calls; each call runs the handler, whose `send` waits for the reader's credit. Lost, its calls abort and it serves
 * its name again once the connection is back.
 */
export class AgentServer implements ServedReader {
  state: 'serving' | 'reconnecting' | 'closed' = 'reconnecting';
  /** The replica's id at the runtime (a new one after each reconnect). */
  replica = '';
  private readonly sessions = new Map<string, AgentSession>();
  private serving?: { resolve(): void; reject(e: EventMeshError): void };

  private constructor(
    private readonly connection: SessionConnection,
    readonly agent: string,
    private readonly handler: AgentHandler,
    private readonly options: ServeOptions,
  ) {}

  /** Serves `agent` on the connection; rejects with the runtime's refusal (AuthError, a quota's UnavailableError...). */
  static async serve(
    connection: SessionConnection,
    agent: string,
    handler: AgentHandler,
    options: ServeOptions = {},
  ): Promise<AgentServer> {
    if (connection.served.has(agent)) throw new Error(`agent ${agent} is already served on this client`);
    await connection.ensure();
    const server = new AgentServer(connection, agent, handler, options);
    connection.served.set(agent, server);
    try {
      await server.announce();
    } catch (e) {
      connection.served.delete(agent);
      throw e;
    }
    return server;
  }

  /**
   * Stops serving: no new session comes here; the calls under way get `graceMs` (default 10 000) to finish, then they
   * are aborted and the sessions still open end (their callers get `AgentGoneError`).
   */
  async close({ graceMs = 10_000 }: { graceMs?: number } = {}): Promise<void> {
    if (this.state === 'closed') return;
    this.setState('closed');
    this.connection.send(encodeFrame({ kind: 'unserve', id: this.agent }));
    const running = [...this.sessions.values()].flatMap((s) => (s.running ? [s.running.done] : []));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(running), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    for (const session of [...this.sessions.values()]) {
      this.end(session, new SessionClosedError('SESSION_CLOSED', `agent ${this.agent} stopped serving`));
      this.connection.send(encodeFrame({ kind: 'close', id: session.id }));
    }
    this.connection.served.delete(this.agent);
  }

  frame(frame: Frame): void {
    if (frame.id === this.agent) {
      if (frame.kind === 'served') {
        this.replica = String(frame.attributes.replica ?? '');
        this.setState('serving');
        this.serving?.resolve();
      } else if (frame.kind === 'error') this.serving?.reject(sessionErrorOf(frame.attributes));
      this.serving = undefined;
      return;
    }
    const session = this.sessions.get(frame.id);
    switch (frame.kind) {
      case 'open':
        // Closing: a session the runtime bound here just before it heard of the unserve is ended back at once.
        if (this.state === 'closed') this.connection.send(encodeFrame({ kind: 'close', id: frame.id }));
        if (this.state === 'closed' || session) return;
        this.sessions.set(
          frame.id,
          new AgentSession(frame.id, Number(frame.attributes.maxChunk), String(frame.attributes.caller ?? ''), frame.n),
        );
        return;
      case 'request':
        if (!session) this.connection.send(encodeFrame({ kind: 'close', id: frame.id }));
        else if (!session.running) this.run(session, frame);
        return;
      case 'credit':
        if (session) {
          session.credit += frame.n;
          this.wake(session);
        }
        return;
      case 'cancel':
        if (session?.running?.call === frame.call)
          session.running.abort.abort(
            new SessionCancelledError(
              'CANCELLED',
              frame.attributes.reason === 'disconnected'
                ? `the caller of session ${session.id} went away (call ${frame.call} cancelled)`
                : `the caller cancelled call ${frame.call} of session ${session.id}`,
              undefined,
              { reason: frame.attributes.reason ?? 'cancelled' },
            ),
          );
        return;
      case 'close':
        if (session)
          this.end(
            session,
            new SessionClosedError(
              'SESSION_CLOSED',
              frame.attributes.reason === 'disconnected'
                ? `the caller of session ${session.id} went away`
                : `the caller closed session ${session.id}`,
              undefined,
              { reason: frame.attributes.reason ?? 'closed' },
            ),
          );
        return;
      case 'error':
        // An error of one call (scope `call`: the agent's own failure, as its caller hears of it when it calls itself
        // over this connection) leaves the session open; only one of the session ends it.
        if (session && frame.attributes.scope !== 'call') this.end(session, sessionErrorOf(frame.attributes));
        return;
      default:
        return;
    }
  }

  lost(error: EventMeshError): void {
    this.serving?.reject(error);
    this.serving = undefined;
    for (const session of [...this.sessions.values()]) this.end(session, error);
    // Streaming was closed: nothing connects again, the replica is over.
    if (error.code === 'SESSION_CLOSED') {
      if (this.connection.served.get(this.agent) === this) this.connection.served.delete(this.agent);
      this.setState('closed', error);
    } else if (this.state !== 'closed') this.setState('reconnecting', error);
  }

  reconnected(): void {
    if (this.state === 'closed') return;
    // Refused when it comes back (a revoked key): the state stays reconnecting, and the refusal is told.
    this.announce().catch((e: EventMeshError) =>
      callBack('onStateChange', this.options.onStateChange, 'reconnecting', e),
    );
  }

  private announce(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.serving = { resolve, reject };
      if (!this.connection.send(encodeFrame({ kind: 'serve', id: this.agent })))
        reject(new SessionClosedError('CONNECTION_LOST', 'the sessions connection is not open'));
    });
  }

  private run(session: AgentSession, frame: Frame): void {
    const abort = new AbortController();
    const call = frame.call;
    const data = frame.data;
    const request: CallRequest = {
      session: session.id,
      call,
      caller: session.caller,
      data,
      text: () => data.toString('utf8'),
      json: <T>() => JSON.parse(data.toString('utf8')) as T,
    };
    const context: CallContext = {
      send: (chunk) => this.send(session, call, chunk, abort.signal),
      signal: abort.signal,
    };
    const done = Promise.resolve()
      .then(() => this.handler(request, context))
      .then(
        () => {
          if (!abort.signal.aborted) this.connection.send(encodeFrame({ kind: 'end', id: session.id, call }));
        },
        (e: unknown) => {
          if (abort.signal.aborted) return;
          const message = e instanceof Error ? e.message : String(e);
          this.connection.send(encodeFrame({ kind: 'error', id: session.id, call, attributes: { message } }));
        },
      )
      .finally(() => {
        if (session.running?.abort === abort) session.running = undefined;
      });
    session.running = { call, abort, done };
  }

  private send(session: AgentSession, call: number, chunk: string | Uint8Array, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    if (data.length > session.maxChunk)
      return Promise.reject(
        new ChunkTooLargeError(
          'PAYLOAD_TOO_LARGE',
          `a chunk of ${data.length} bytes is above the session's largest (${session.maxChunk} bytes)`,
          413,
        ),
      );
    const frame = encodeFrame({ kind: 'chunk', id: session.id, call, data });
    if (session.waiters.length === 0 && session.credit >= data.length) {
      session.credit -= data.length;
      this.connection.send(frame);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        frame,
        bytes: data.length,
        resolve: () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
        reject,
      };
      const onAbort = () => {
        const at = session.waiters.indexOf(waiter);
        if (at >= 0) session.waiters.splice(at, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      session.waiters.push(waiter);
    });
  }

  /** Sends what waited for credit, in order, while there is credit for the next one. */
  private wake(session: AgentSession): void {
    while (session.waiters.length > 0 && session.credit >= session.waiters[0].bytes) {
      const waiter = session.waiters.shift()!;
      session.credit -= waiter.bytes;
      this.connection.send(waiter.frame);
      waiter.resolve();
    }
  }

  private end(session: AgentSession, reason: EventMeshError): void {
    this.sessions.delete(session.id);
    session.running?.abort.abort(reason);
    for (const waiter of session.waiters.splice(0)) waiter.reject(reason);
  }

  private setState(state: AgentServer['state'], error?: EventMeshError): void {
    if (this.state === state) return;
    this.state = state;
    callBack('onStateChange', this.options.onStateChange, state, error);
  }
}

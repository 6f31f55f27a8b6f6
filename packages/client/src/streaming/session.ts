import { randomUUID } from 'node:crypto';
import { ConnectionError, EventMeshError } from '../errors';
import type { FrameReader, SessionConnection } from './connection';
import { guardedWaiter } from './waiter';
import { SessionBusyError, SessionCancelledError, SessionClosedError, sessionErrorOf } from './errors';
import { CreditReturn } from './credit-return';
import { encodeFrame, type Frame } from './frame';

export interface OpenSessionOptions {
  /** The session's credit window, in bytes: the most of its chunks on the way to you (default: the runtime's, 256 KiB). */
  windowBytes?: number;
  /** With no replica of the agent serving, wait this long for one (default 0: `AgentNotFoundError` at once). */
  waitMs?: number;
}

export interface CallOptions {
  /** Aborting it cancels the call (the agent's handler sees its signal abort). */
  signal?: AbortSignal;
}

/** A request: bytes, a string (UTF-8), or anything else as JSON. */
export type RequestBody = string | Uint8Array | object;

/** Beyond this, an open the runtime never answers is given up (it answers within its own bounds: waitMs, open timeout). */
const OPEN_GUARD_MS = 60_000;

/**
 * A session to an agent (`streaming.openSession(agentId)`): bound to one replica of the agent for its life, one call
 * at a time, each call's answer a stream of chunks. The reader's credit is given back as chunks are consumed, so a slow
 * reader slows the agent, and nothing buffers more than the window.
 */
export class StreamSession implements FrameReader {
  /** `<agent>:<uuid>`. */
  readonly id: string;
  private readonly credit = new CreditReturn(
    (n) => this.connection.send(encodeFrame({ kind: 'credit', id: this.id, n })),
    () => this.ended !== undefined,
  );
  private calls = 0;
  private current?: CallStream;
  private ended?: EventMeshError;
  private opening?: { resolve(): void; reject(e: EventMeshError): void };
  /** Bytes consumed and not yet given back as credit. */

  private constructor(
    private readonly connection: SessionConnection,
    readonly agent: string,
  ) {
    this.id = `${agent}:${randomUUID()}`;
  }

  /** Opens a session to `agent`; rejects with `AgentNotFoundError` when no replica serves it, or the runtime's refusal. */
  static async open(
    connection: SessionConnection,
    agent: string,
    options: OpenSessionOptions = {},
  ): Promise<StreamSession> {
    await connection.ensure();
    const session = new StreamSession(connection, agent);
    connection.callers.set(session.id, session);
    await new Promise<void>((resolve, reject) => {
      session.opening = guardedWaiter(
        (options.waitMs ?? 0) + OPEN_GUARD_MS,
        () => {
          connection.callers.delete(session.id);
          connection.send(encodeFrame({ kind: 'close', id: session.id }));
          reject(new ConnectionError('OPEN_TIMEOUT', `the runtime did not answer the open of ${session.id}`));
        },
        {
          resolve,
          reject: (e) => {
            connection.callers.delete(session.id);
            reject(e);
          },
        },
      );
      const sent = connection.send(
        encodeFrame({
          kind: 'open',
          id: session.id,
          n: options.windowBytes ?? 0,
          attributes: options.waitMs ? { waitMs: options.waitMs } : {},
        }),
      );
      if (!sent) session.lost(new SessionClosedError('CONNECTION_LOST', 'the sessions connection is not open'));
    });
    return session;
  }

  /**
   * Calls the agent: the answer is an async iterable of chunks (Buffers), with `forEach` and `text`. One call at a
   * time: a call while another runs throws `SessionBusyError`. Errors end the iteration: `AgentCallError` (the agent
   * failed the call; the session stays open), `AgentGoneError` (its replica went away; the session is over).
   */
  call(request: RequestBody, options: CallOptions = {}): CallStream {
    if (this.ended) throw this.ended;
    if (this.current) throw new SessionBusyError('SESSION_BUSY', `a call of session ${this.id} is under way`, 409);
    const data =
      typeof request === 'string'
        ? Buffer.from(request, 'utf8')
        : request instanceof Uint8Array
          ? request
          : Buffer.from(JSON.stringify(request), 'utf8');
    const call = new CallStream(this, ++this.calls);
    this.current = call;
    if (!this.connection.send(encodeFrame({ kind: 'request', id: this.id, call: call.number, data }))) {
      this.lost(new SessionClosedError('CONNECTION_LOST', 'the sessions connection is not open'));
      return call;
    }
    if (options.signal) {
      const signal = options.signal;
      if (signal.aborted) call.cancel();
      else {
        // Taken off once the call is over: a signal kept for many calls must not hold every call it was given.
        const onAbort = () => call.cancel();
        signal.addEventListener('abort', onAbort, { once: true });
        call.detach = () => signal.removeEventListener('abort', onAbort);
      }
    }
    return call;
  }

  /** Closes the session (a call under way is cancelled); the replica forgets it. */
  close(): void {
    if (this.ended) return;
    this.connection.send(encodeFrame({ kind: 'close', id: this.id }));
    this.end(new SessionClosedError('SESSION_CLOSED', `session ${this.id} was closed`));
  }

  frame(frame: Frame): void {
    if (this.opening) {
      if (frame.kind === 'opened') {
        this.credit.reset(frame.n);
        this.opening.resolve();
        this.opening = undefined;
      } else if (frame.kind === 'error') {
        this.opening.reject(sessionErrorOf(frame.attributes));
        this.opening = undefined;
      }
      return;
    }
    const current = this.current;
    switch (frame.kind) {
      case 'chunk':
        // A chunk of a call no longer read (cancelled, abandoned): its credit goes straight back.
        if (current && frame.call === current.number && current.push(frame.data)) return;
        this.consumed(frame.data.length);
        return;
      case 'end':
        if (current && frame.call === current.number) {
          this.current = undefined;
          current.finish();
        }
        return;
      case 'error': {
        const error = sessionErrorOf(frame.attributes);
        if (frame.attributes.scope === 'call') {
          if (current && frame.call === current.number) {
            this.current = undefined;
            current.fail(error);
          }
          return;
        }
        this.connection.callers.delete(this.id);
        this.end(error);
        return;
      }
      default:
        return;
    }
  }

  lost(error: EventMeshError): void {
    if (this.opening) {
      this.opening.reject(error);
      this.opening = undefined;
      return;
    }
    this.end(error);
  }

  /** A call is over on the caller's side: another may start. */
  released(call: CallStream): void {
    if (this.current === call) this.current = undefined;
  }

  /** The call was cancelled by its caller: the agent is told. */
  cancelled(call: CallStream): void {
    this.connection.send(encodeFrame({ kind: 'cancel', id: this.id, call: call.number }));
    this.released(call);
  }

  /** The window the runtime granted, in bytes. */
  get window(): number {
    return this.credit.window;
  }

  /** `bytes` of chunks were consumed (or dropped): given back to the agent as credit (credit-return.ts). */
  consumed(bytes: number): void {
    this.credit.consumed(bytes);
  }

  private end(error: EventMeshError): void {
    if (this.ended) return;
    this.ended = error;
    this.connection.callers.delete(this.id);
    const current = this.current;
    this.current = undefined;
    current?.fail(error);
  }
}

/**
 * One call's answer: an async iterable of chunks, in order. Breaking out of a `for await` cancels the call; `cancel()`
 * cancels it and fails the iteration with `SessionCancelledError`.
 */
export class CallStream implements AsyncIterable<Buffer> {
  private readonly queue: Buffer[] = [];
  /** running: chunks may come; finished: the agent ended it; failed: an error (or a cancel) ended it. */
  private state: 'running' | 'finished' | 'failed' = 'running';
  private failure?: EventMeshError;
  private waiter?: { resolve(r: IteratorResult<Buffer>): void; reject(e: unknown): void };
  /** @internal Takes the call's abort listener off its signal (once the call is over). */
  detach?: () => void;

  constructor(
    private readonly session: StreamSession,
    readonly number: number,
  ) {}

  /** Calls `fn` for each chunk in order, awaiting it (a slow `fn` slows the agent); resolves when the call ends. */
  async forEach(fn: (chunk: Buffer) => unknown): Promise<void> {
    for await (const chunk of this) await fn(chunk);
  }

  /** The whole answer as text (UTF-8). */
  async text(): Promise<string> {
    const parts: Buffer[] = [];
    for await (const chunk of this) parts.push(chunk);
    return Buffer.concat(parts).toString('utf8');
  }

  /** Cancels the call: the agent's handler sees its signal abort; the iteration fails with `SessionCancelledError`. */
  cancel(): void {
    if (this.state !== 'running') return;
    this.session.cancelled(this);
    this.drop();
    this.fail(
      new SessionCancelledError('CANCELLED', `call ${this.number} of session ${this.session.id} was cancelled`),
    );
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return {
      next: () => this.next(),
      return: () => {
        // The reader left: a call still running is cancelled; what it holds unread is given back as credit.
        if (this.state === 'running') {
          this.session.cancelled(this);
          this.state = 'failed';
          this.failure = new SessionCancelledError('CANCELLED', 'the reader left the call');
          this.over();
        }
        this.drop();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  /** A chunk arrived; false when the call is no longer read. */
  push(chunk: Buffer): boolean {
    if (this.state !== 'running') return false;
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = undefined;
      this.session.consumed(chunk.length);
      waiter.resolve({ value: chunk, done: false });
    } else this.queue.push(chunk);
    return true;
  }

  /** The agent ended the call: what is queued is still read, then the iteration ends. */
  finish(): void {
    if (this.state !== 'running') return;
    this.state = 'finished';
    this.over();
    this.waiter?.resolve({ value: undefined, done: true });
    this.waiter = undefined;
  }

  /** An error ended the call: what is queued is still read, then the iteration fails with it. */
  fail(error: EventMeshError): void {
    if (this.state === 'finished' || this.failure) return;
    this.state = 'failed';
    this.failure = error;
    this.over();
    this.waiter?.reject(error);
    this.waiter = undefined;
  }

  private next(): Promise<IteratorResult<Buffer>> {
    const chunk = this.queue.shift();
    if (chunk) {
      this.session.consumed(chunk.length);
      return Promise.resolve({ value: chunk, done: false });
    }
    if (this.failure) return Promise.reject(this.failure);
    if (this.state === 'finished') return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  /** The call is over: another may start on the session, and its signal is let go. */
  private over(): void {
    this.session.released(this);
    this.detach?.();
    this.detach = undefined;
  }

  /** Nothing more is read: the chunks waiting are given back as credit. */
  private drop(): void {
    let bytes = 0;
    for (const chunk of this.queue.splice(0)) bytes += chunk.length;
    this.session.consumed(bytes);
  }
}

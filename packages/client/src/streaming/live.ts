import { randomUUID } from 'node:crypto';
import { ConnectionError, EventMeshError } from '../errors';
import type { FrameReader, SessionConnection } from './connection';
import { ChunkTooLargeError, SessionClosedError, SessionEndedError, sessionErrorOf } from './errors';
import { callBack } from './callback';
import { guardedWaiter } from './waiter';
import { CreditReturn } from './credit-return';
import { encodeFrame, type Frame } from './frame';

/** Where a publication is in its session: the home's epoch, and its offset in that epoch. */
export interface SessionPosition {
  epoch: number;
  offset: number;
}

export interface Publication {
  data: Buffer;
  /** The publisher's id (`<session>:<uuid>`): each publisher's publications come in the order it published them. */
  publisher: string;
  position: SessionPosition;
}

export interface PresenceEvent {
  type: 'join' | 'leave';
  /** The subscriber (its connection's id at the runtime). */
  client: string;
  principal: string;
}

export interface SubscribeOptions {
  /** The most bytes of publications this subscriber may have unread; further behind, it is dropped (default: the runtime's, 1 MiB). */
  windowBytes?: number;
  /** Resume after this position: what came since is replayed from the session's history, if it still holds it. */
  since?: SessionPosition;
  /** Joins and leaves of the session's subscribers. */
  onPresence?: (event: PresenceEvent) => void;
  /** Each subscription that asked to resume (`since`, or after the connection came back): was nothing missed? */
  onRecovery?: (recovered: boolean, position: SessionPosition) => void;
}

const GUARD_MS = 60_000;

/**
 * A subscription to a named session (`streaming.subscribeSession(name)`): an async iterable of its publications in
 * order. Credit is given back as they are read: a reader that falls further behind than its window is dropped by the
 * runtime (`SlowSubscriberError`). When the connection is lost it subscribes again once it is back, from its last
 * position: `onRecovery(false)` says publications were missed (the history no longer held them). A session that ends
 * (idle, its home gone) ends the iteration with `SessionEndedError`.
 */
export class SessionSubscription implements FrameReader, AsyncIterable<Publication> {
  /** Whether the last (re)subscription missed nothing. */
  recovered = true;
  /** The last publication received (what a later `since` resumes after). */
  position?: SessionPosition;
  private readonly members = new Map<string, { client: string; principal: string }>();
  /** Publications received and not read yet, each with the subscription (credit window) it came on. */
  private readonly queue: { p: Publication; window: number }[] = [];
  /** Which subscription (1 the first, +1 each time it subscribes again) the credit given back now belongs to. */
  private windowOf = 0;
  private waiter?: { resolve(r: IteratorResult<Publication>): void; reject(e: unknown): void };
  private failure?: EventMeshError;
  private done = false;
  private readonly credit = new CreditReturn(
    (n) => this.connection.send(encodeFrame({ kind: 'credit', id: this.name, n })),
    () => this.done,
  );
  private subscribing?: { resolve(): void; reject(e: EventMeshError): void };

  private constructor(
    private readonly connection: SessionConnection,
    readonly name: string,
    private readonly options: SubscribeOptions,
  ) {
    this.position = options.since;
  }

  static async subscribe(
    connection: SessionConnection,
    name: string,
    options: SubscribeOptions = {},
  ): Promise<SessionSubscription> {
    if (connection.callers.has(name)) throw new Error(`session ${name} is already subscribed on this client`);
    await connection.ensure();
    const subscription = new SessionSubscription(connection, name, options);
    await subscription.send();
    connection.resumable.add(subscription);
    return subscription;
  }

  /** The session's subscribers now (as of the subscription, then its presence events). */
  subscribers(): { client: string; principal: string }[] {
    return [...this.members.values()];
  }

  unsubscribe(): void {
    if (this.done) return;
    this.connection.send(encodeFrame({ kind: 'unsubscribe', id: this.name }));
    this.finish(undefined);
  }

  [Symbol.asyncIterator](): AsyncIterator<Publication> {
    return {
      next: () => {
        const queued = this.queue.shift();
        if (queued) {
          // What came before the subscription was made again is no credit of this one: the runtime's new window
          // counts only what it sent since, and credit for more would let it send past the window.
          if (queued.window === this.windowOf) this.credit.consumed(queued.p.data.length);
          return Promise.resolve({ value: queued.p, done: false });
        }
        if (this.failure) return Promise.reject(this.failure);
        if (this.done) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
      },
      return: () => {
        this.unsubscribe();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  frame(frame: Frame): void {
    switch (frame.kind) {
      case 'subscribed': {
        const recovered = frame.attributes.recovered === true;
        this.credit.reset(Number(frame.attributes.window ?? 0));
        this.windowOf++;
        this.members.clear();
        for (const m of JSON.parse(String(frame.attributes.members ?? '[]')) as { client: string; principal: string }[])
          this.members.set(m.client, m);
        const asked = this.position !== undefined;
        this.recovered = recovered;
        if (!recovered || !asked) this.position = { epoch: frame.call, offset: frame.n };
        this.subscribing?.resolve();
        this.subscribing = undefined;
        if (asked) callBack('onRecovery', this.options.onRecovery, recovered, this.position!);
        return;
      }
      case 'chunk': {
        const p: Publication = {
          data: frame.data,
          publisher: String(frame.attributes.publisher),
          position: { epoch: frame.call, offset: frame.n },
        };
        this.position = p.position;
        const waiter = this.waiter;
        if (waiter) {
          this.waiter = undefined;
          this.credit.consumed(p.data.length);
          waiter.resolve({ value: p, done: false });
        } else this.queue.push({ p, window: this.windowOf });
        return;
      }
      case 'presence': {
        const event: PresenceEvent = {
          type: frame.attributes.event === 'leave' ? 'leave' : 'join',
          client: String(frame.attributes.client),
          principal: String(frame.attributes.principal),
        };
        if (event.type === 'join') this.members.set(event.client, { client: event.client, principal: event.principal });
        else this.members.delete(event.client);
        callBack('onPresence', this.options.onPresence, event);
        return;
      }
      case 'end':
        return this.finish(
          new SessionEndedError(
            String(frame.attributes.code ?? 'SESSION_ENDED'),
            String(frame.attributes.message ?? `session ${this.name} ended`),
            410,
            { ...frame.attributes },
          ),
        );
      case 'error': {
        const error = sessionErrorOf(frame.attributes);
        if (this.subscribing) {
          this.subscribing.reject(error);
          this.subscribing = undefined;
          this.connection.callers.delete(this.name);
          this.connection.resumable.delete(this);
          this.done = true;
          return;
        }
        return this.finish(error);
      }
      default:
        return;
    }
  }

  /** The connection was lost: it subscribes again (from its position) once the connection is back. */
  lost(error: EventMeshError): void {
    if (this.subscribing) {
      this.subscribing.reject(error);
      this.subscribing = undefined;
    }
    if (error.code === 'SESSION_CLOSED') this.finish(error);
  }

  /** The connection is back: subscribe again, resuming after the last position. */
  reconnected(): void {
    if (this.done) return;
    // Lost again before the runtime answered: it subscribes again on the next connection, as after the first loss.
    this.send().catch((e: EventMeshError) => {
      if (!(e instanceof SessionClosedError && e.code !== 'SESSION_CLOSED')) this.finish(e);
    });
  }

  private send(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.subscribing = guardedWaiter(
        GUARD_MS,
        () => {
          // Given up: the name is free to subscribe again, and an answer that still comes leaves nothing unread (its
          // publications would hold the window until the runtime dropped it).
          if (this.connection.callers.get(this.name) === this) this.connection.callers.delete(this.name);
          this.connection.send(encodeFrame({ kind: 'unsubscribe', id: this.name }));
          this.subscribing?.reject(
            new ConnectionError('SUBSCRIBE_TIMEOUT', `no answer to the subscription of ${this.name}`),
          );
          this.subscribing = undefined;
        },
        { resolve, reject },
      );
      this.connection.callers.set(this.name, this);
      const at = this.position;
      const sent = this.connection.send(
        encodeFrame({
          kind: 'subscribe',
          id: this.name,
          n: this.options.windowBytes ?? 0,
          attributes: at ? { epoch: at.epoch, offset: at.offset } : {},
        }),
      );
      if (!sent)
        this.subscribing.reject(new SessionClosedError('CONNECTION_LOST', 'the sessions connection is not open'));
    });
  }

  private finish(error: EventMeshError | undefined): void {
    if (this.done) return;
    this.done = true;
    this.failure = error;
    if (this.connection.callers.get(this.name) === this) this.connection.callers.delete(this.name);
    this.connection.resumable.delete(this);
    const waiter = this.waiter;
    this.waiter = undefined;
    if (error) waiter?.reject(error);
    else waiter?.resolve({ value: undefined, done: true });
  }
}

/**
 * A publisher to a named session (`streaming.openSessionPublisher(name)`): its publications reach every current
 * subscriber in the order it published them. `publish` waits for credit (the session's home gives it back once it has
 * handed a publication on), so a publisher faster than the runtime is slowed, not buffered.
 */
export class SessionPublisher implements FrameReader {
  readonly id: string;
  private credit = 0;
  private maxChunk = 0;
  private readonly waiters: { frame: Buffer; bytes: number; resolve(): void; reject(e: unknown): void }[] = [];
  private ended?: EventMeshError;
  private opening?: { resolve(): void; reject(e: EventMeshError): void };

  private constructor(
    private readonly connection: SessionConnection,
    readonly name: string,
  ) {
    this.id = `${name}:${randomUUID()}`;
  }

  static async open(
    connection: SessionConnection,
    name: string,
    options: { windowBytes?: number } = {},
  ): Promise<SessionPublisher> {
    await connection.ensure();
    const publisher = new SessionPublisher(connection, name);
    connection.publishers.set(publisher.id, publisher);
    await new Promise<void>((resolve, reject) => {
      // As an open of a Mode 1 session: one the runtime never answers is given up, not waited for without end.
      publisher.opening = guardedWaiter(
        GUARD_MS,
        () => {
          connection.send(encodeFrame({ kind: 'close', id: publisher.id }));
          publisher.lost(new ConnectionError('OPEN_TIMEOUT', `the runtime did not answer the open of ${publisher.id}`));
        },
        { resolve, reject },
      );
      if (!connection.send(encodeFrame({ kind: 'publisher', id: publisher.id, n: options.windowBytes ?? 0 })))
        publisher.lost(new SessionClosedError('CONNECTION_LOST', 'the sessions connection is not open'));
    });
    return publisher;
  }

  /** Why it ended (closed, the session ended, the connection lost), once it has: a publish then rejects with it. */
  get error(): EventMeshError | undefined {
    return this.ended;
  }

  /** Publishes (a string as UTF-8, bytes as they are, anything else as JSON); resolves once it is sent within credit. */
  publish(data: string | Uint8Array | object): Promise<void> {
    if (this.ended) return Promise.reject(this.ended);
    const bytes =
      typeof data === 'string'
        ? Buffer.from(data, 'utf8')
        : data instanceof Uint8Array
          ? data
          : Buffer.from(JSON.stringify(data), 'utf8');
    if (bytes.length > this.maxChunk)
      return Promise.reject(
        new ChunkTooLargeError('PAYLOAD_TOO_LARGE', `a publication is at most ${this.maxChunk} bytes`, 413),
      );
    const frame = encodeFrame({ kind: 'publish', id: this.id, data: bytes });
    if (this.waiters.length === 0 && this.credit >= bytes.length) {
      this.credit -= bytes.length;
      this.connection.send(frame);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => this.waiters.push({ frame, bytes: bytes.length, resolve, reject }));
  }

  close(): void {
    if (this.ended) return;
    this.connection.send(encodeFrame({ kind: 'close', id: this.id }));
    this.end(new SessionClosedError('SESSION_CLOSED', `publisher ${this.id} was closed`));
  }

  frame(frame: Frame): void {
    switch (frame.kind) {
      case 'opened':
        this.credit = frame.n;
        this.maxChunk = Number(frame.attributes.maxChunk ?? frame.n);
        this.opening?.resolve();
        this.opening = undefined;
        return;
      case 'credit':
        this.credit += frame.n;
        while (this.waiters.length > 0 && this.credit >= this.waiters[0].bytes) {
          const w = this.waiters.shift()!;
          this.credit -= w.bytes;
          this.connection.send(w.frame);
          w.resolve();
        }
        return;
      case 'error':
        return this.lost(sessionErrorOf(frame.attributes));
      default:
        return;
    }
  }

  lost(error: EventMeshError): void {
    if (this.opening) {
      this.opening.reject(error);
      this.opening = undefined;
    }
    this.end(error);
  }

  private end(error: EventMeshError): void {
    if (this.ended) return;
    this.ended = error;
    this.connection.publishers.delete(this.id);
    for (const w of this.waiters.splice(0)) w.reject(error);
  }
}

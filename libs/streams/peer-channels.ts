import { WebSocket } from 'ws';
import type { EventFrame } from '@libs/frame';
import { createLogger } from '@libs/logging';
import { CHANNEL_PATH, frameToWire, OwnerMessage, parseHolderMessage } from './cluster-channel';
import { dialHolder, keepAlive } from './cluster-dial';
import type { ClusterCredential } from './cluster-credential';
import { ackTimeoutOf, ClientAction, StreamOutcome, StreamPolicy, StreamTarget } from './stream-hub';
import { sendInTurn } from './turn-writes';

/** How long past the ack timeout the owner waits for a holder's answer (the holder's own timer answers first). */
const ANSWER_SLACK_MS = 5000;
const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 5000;
/** A channel with no pong for this long is dead (a silent peer): it is closed, and what it carried is `gone`. */
const HEARTBEAT_MS = 5000;
/** How long a request to a holder (an operator's disconnect, a client's answer handed on) waits for its reply. */
const REQUEST_ANSWER_MS = 5000;

export interface PeerAddress {
  holder: string;
  address: string;
}

interface InFlight {
  subscriptionId: string;
  finish(outcome: StreamOutcome): void;
  /** The holder's client extended the delivery's deadline. */
  extend?(deadlineMs: number): void;
}

/**
 * The owner's end of the internal stream channel (cluster-channel.ts): one WebSocket per holder, opened on first
 * use and again after a loss, with backoff (a holder that cannot be reached is `available() === false` until its
 * backoff ends, so deliveries go to other holders meanwhile). A lost channel settles everything in flight on it as
 * `gone`; no answer within the ack timeout (plus a slack) is `timeout`, and the holder is told to withdraw it.
 */
export class PeerChannels {
  private readonly log = createLogger('PeerChannels');
  private readonly peers = new Map<string, Peer>();

  constructor(
    private readonly credential: ClusterCredential,
    /** This process's holder id, which the tokens it makes name. */
    private readonly self: string,
  ) {}

  /** False while the holder is in backoff after a failed handshake or a lost channel. */
  available(holder: string): boolean {
    return (this.peers.get(holder)?.downUntil ?? 0) <= Date.now();
  }

  /** Deliveries of a subscription waiting for an answer from `holder`. */
  inFlight(holder: string, subscriptionId: string): number {
    return this.peers.get(holder)?.perSubscription.get(subscriptionId) ?? 0;
  }

  deliver(
    to: PeerAddress,
    target: StreamTarget,
    frame: EventFrame,
    ownerEpoch: number,
    signal?: AbortSignal,
  ): Promise<StreamOutcome> {
    return this.peerOf(to, true).deliver(target, frame, ownerEpoch, signal);
  }

  /** Asks `to` to disconnect one client of a subscription; true when it held it and did. */
  disconnect(to: PeerAddress, subscriptionId: string, clientId: string): Promise<boolean> {
    return this.peerOf(to).request((id) => ({ type: 'disconnect', id, subscriptionId, clientId }), subscriptionId);
  }

  /** Hands `to` a client's answer (or extension) for a delivery; true when it held the delivery. */
  settle(to: PeerAddress, subscriptionId: string, deliveryId: string, outcome: ClientAction): Promise<boolean> {
    return this.peerOf(to).request(
      (id) => ({ type: 'settle', id, subscriptionId, deliveryId, outcome }),
      subscriptionId,
    );
  }

  private peerOf(to: PeerAddress, prune = false): Peer {
    let peer = this.peers.get(to.holder);
    if (!peer || peer.address !== to.address) {
      peer?.close();
      if (prune) this.prune();
      peer = new Peer(to, this.credential, this.self, this.log);
      this.peers.set(to.holder, peer);
    }
    return peer;
  }

  close(): void {
    for (const peer of this.peers.values()) peer.close();
    this.peers.clear();
  }

  /** Forgets holders with no channel, nothing in flight and no backoff left (processes that are gone for good). */
  private prune(): void {
    for (const [holder, peer] of this.peers) if (peer.idle()) this.peers.delete(holder);
  }
}

class Peer {
  readonly holder: string;
  readonly address: string;
  downUntil = 0;
  readonly perSubscription = new Map<string, number>();
  private backoffMs = FIRST_BACKOFF_MS;
  private socket?: WebSocket;
  private opening?: Promise<WebSocket>;
  private nextId = 0;
  private readonly pending = new Map<number, InFlight>();
  private closed = false;

  constructor(
    to: PeerAddress,
    private readonly credential: ClusterCredential,
    private readonly self: string,
    private readonly log: ReturnType<typeof createLogger>,
  ) {
    this.holder = to.holder;
    this.address = to.address;
  }

  async deliver(
    target: StreamTarget,
    frame: EventFrame,
    ownerEpoch: number,
    signal?: AbortSignal,
  ): Promise<StreamOutcome> {
    let socket: WebSocket;
    try {
      socket = await this.open();
    } catch (e) {
      this.log.warn(
        { holder: this.holder, address: this.address, error: (e as Error).message, retryInMs: this.backoffMs },
        'cannot open the stream channel',
      );
      this.down();
      return { kind: 'gone' };
    }
    if (signal?.aborted) return { kind: 'gone' };
    const id = ++this.nextId;
    const message: OwnerMessage = {
      type: 'deliver',
      id,
      subscriptionId: target.id,
      ownerEpoch,
      policy: (target.config as { policy?: StreamPolicy }).policy ?? 'LOAD_BALANCE',
      ackTimeoutMs: ackTimeoutOf(target),
      frame: frameToWire(frame),
    };
    return new Promise<StreamOutcome>((resolve) => {
      const withdraw = () => {
        if (socket.readyState === WebSocket.OPEN)
          socket.send(JSON.stringify({ type: 'cancel', id } satisfies OwnerMessage));
      };
      const onAbort = () => {
        withdraw();
        finish({ kind: 'gone' });
      };
      const expire = () => {
        withdraw();
        finish({ kind: 'timeout' });
      };
      let timer = setTimeout(expire, message.ackTimeoutMs + ANSWER_SLACK_MS);
      const extend = (deadlineMs: number) => {
        clearTimeout(timer);
        timer = setTimeout(expire, deadlineMs + ANSWER_SLACK_MS);
      };
      const finish = (outcome: StreamOutcome) => {
        if (!this.pending.delete(id)) return;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const left = (this.perSubscription.get(target.id) ?? 1) - 1;
        if (left > 0) this.perSubscription.set(target.id, left);
        else this.perSubscription.delete(target.id);
        resolve(outcome);
      };
      this.pending.set(id, { subscriptionId: target.id, finish, extend });
      this.perSubscription.set(target.id, (this.perSubscription.get(target.id) ?? 0) + 1);
      signal?.addEventListener('abort', onAbort, { once: true });
      sendInTurn(socket, JSON.stringify(message), (error) => {
        if (error) finish({ kind: 'gone' });
      });
    });
  }

  /** One request the holder answers `ack` (done) or `gone`; false too when the channel fails or no answer comes in time. */
  async request(message: (id: number) => OwnerMessage, subscriptionId: string): Promise<boolean> {
    let socket: WebSocket;
    try {
      socket = await this.open();
    } catch (e) {
      this.log.warn(
        { holder: this.holder, address: this.address, error: (e as Error).message },
        'cannot open the stream channel',
      );
      this.down();
      return false;
    }
    const id = ++this.nextId;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => finish({ kind: 'timeout' }), REQUEST_ANSWER_MS);
      const finish = (outcome: StreamOutcome) => {
        if (!this.pending.delete(id)) return;
        clearTimeout(timer);
        resolve(outcome.kind === 'ack');
      };
      this.pending.set(id, { subscriptionId, finish });
      socket.send(JSON.stringify(message(id)), (error) => {
        if (error) finish({ kind: 'gone' });
      });
    });
  }

  close(): void {
    this.closed = true;
    this.socket?.terminate();
  }

  idle(): boolean {
    return !this.socket && !this.opening && this.pending.size === 0 && this.downUntil <= Date.now();
  }

  private down(): void {
    this.downUntil = Date.now() + this.backoffMs;
    this.backoffMs = Math.min(MAX_BACKOFF_MS, this.backoffMs * 2);
  }

  private open(): Promise<WebSocket> {
    if (this.socket?.readyState === WebSocket.OPEN) return Promise.resolve(this.socket);
    if (this.closed) return Promise.reject(new Error('closed'));
    this.opening ??= this.handshake().finally(() => (this.opening = undefined));
    return this.opening;
  }

  private handshake(): Promise<WebSocket> {
    return dialHolder(this, CHANNEL_PATH, this.credential, this.self, 64 * 1024 * 1024).then((socket) => {
      this.attach(socket);
      return socket;
    });
  }

  private attach(socket: WebSocket): void {
    this.socket = socket;
    this.backoffMs = FIRST_BACKOFF_MS;
    this.downUntil = 0;
    keepAlive(socket, HEARTBEAT_MS, () =>
      this.log.warn({ holder: this.holder }, 'the stream channel went silent; closing it'),
    );
    socket.on('message', (raw) => {
      const message = parseHolderMessage(String(raw));
      if (message?.type === 'answer') this.pending.get(message.id)?.finish(message.outcome);
      else if (message?.type === 'extend') this.pending.get(message.id)?.extend?.(message.deadlineMs);
    });
    socket.on('error', (e) => this.log.warn({ holder: this.holder, error: e.message }, 'stream channel error'));
    socket.on('close', () => {
      if (this.socket === socket) this.socket = undefined;
      if (this.pending.size > 0)
        this.log.warn(
          { holder: this.holder, inFlight: this.pending.size },
          'stream channel lost; its deliveries are gone',
        );
      for (const p of [...this.pending.values()]) p.finish({ kind: 'gone' });
      if (!this.closed) this.down();
    });
  }
}

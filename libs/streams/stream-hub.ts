import { randomUUID } from 'node:crypto';
import type { CompiledFilter } from '@libs/filter';
import { EventFrame } from '@libs/frame';
import { createLogger } from '@libs/logging';
import type { SubscriptionEntity } from '@libs/storage';

/** What a stream client answered for one delivery. */
export type StreamOutcome =
  | { kind: 'ack' }
  | { kind: 'nack'; delayMs: number }
  | { kind: 'reject'; reason: string }
  | { kind: 'timeout' }
  | { kind: 'gone' };

/**
 * What a client may send for a delivery it holds: an answer that settles it, or `extend`, which sets its ack
 * deadline to `deadlineMs` from now (a handler that needs longer than the ack timeout keeps its delivery).
 */
export type ClientAction =
  Extract<StreamOutcome, { kind: 'ack' | 'nack' | 'reject' }> | { kind: 'extend'; deadlineMs: number };

/** The longest a client may set a delivery's ack deadline to, from now (the most a subscription's ack timeout is). */
export const MAX_ACK_DEADLINE_MS = 3_600_000;

export interface StreamDelivery {
  deliveryId: string;
  frame: EventFrame;
}

/**
 * Consecutive events of a batched STREAM subscription's partition (`config.batch`), handed to one client as one
 * delivery: one id, one answer for all of them. `entries` are the events in structured JSON, `frames` the same
 * events (what goes event by event when the batch cannot go whole).
 */
export interface StreamBatch {
  frames: EventFrame[];
  entries: Buffer[];
}

/** A batch as a client gets it. */
export interface StreamBatchDelivery {
  deliveryId: string;
  entries: Buffer[];
}

/** How a stream client is connected (its id's prefix: `ws:`, `sse:`, `poll:`). */
export type StreamTransport = 'websocket' | 'sse' | 'long-poll';

/** A connected client as the operator's listing shows it (stream-clients.ts). */
export interface StreamClientView {
  clientId: string;
  transport: StreamTransport;
  window: number;
  /** Deliveries it holds unanswered now. */
  inFlight: number;
  /** When it connected (ISO 8601). */
  since: string;
}

/** One connected stream client (an SSE connection, or a long-poll consumer) of one subscription. */
export interface StreamMember {
  readonly id: string;
  readonly subscriptionId: string;
  /** Most deliveries this member holds unanswered (flow control). */
  readonly window: number;
  /** Hands a delivery to the client (writes it to the connection, or queues it for the next poll). */
  push(delivery: StreamDelivery): void;
  /** Hands a batch to the client as one delivery; a member without it takes a batch's events one by one. */
  pushBatch?(delivery: StreamBatchDelivery): void;
  /** MULTICAST: the client's own filter; it gets only the events this matches. */
  readonly filter?: CompiledFilter;
  /** Ends the client's connection (an operator disconnected it); the hub has already let it go. */
  close?(): void;
  /** A delivery it held passed its ack timeout unanswered (already settled as a timeout, to be delivered again). */
  expired?(deliveryId: string): void;
}

interface Pending {
  member: StreamMember;
  resolve(outcome: StreamOutcome): void;
  timer: NodeJS.Timeout;
  /** Times the delivery out; `extend` sets it again. */
  expire(): void;
  extended?(deadlineMs: number): void;
}

export type StreamPolicy = 'LOAD_BALANCE' | 'BROADCAST' | 'MULTICAST';

/** Whatever delivers an event of a STREAM subscription: this process's hub, or the cluster router over all of them. */
export interface StreamDeliverer {
  deliver(
    subscription: StreamTarget,
    frame: EventFrame,
    signal?: AbortSignal,
    options?: DeliverOptions,
  ): Promise<StreamOutcome>;
  /**
   * A batch (LOAD_BALANCE): as one delivery to a client that takes batches (waiting for room in one's window), else
   * event by event, the answers combined as a BROADCAST's are ({@link combineOutcomes}): the batch is acked only
   * when every event is.
   */
  deliverBatch(
    subscription: StreamTarget,
    batch: StreamBatch,
    signal?: AbortSignal,
    options?: DeliverOptions,
  ): Promise<StreamOutcome>;
}

/** What a delivery needs of its subscription: its id, policy and ack timeout (a forwarded delivery carries only these). */
export type StreamTarget = Pick<SubscriptionEntity, 'id' | 'config'>;

export interface DeliverOptions {
  /** The epoch the delivery id carries: the dispatching owner's (a partition lease's), else the hub's own. */
  epoch?: number;
  /** When no client of the subscription is connected here, `gone` at once instead of waiting for one to connect. */
  onlyIfConnected?: boolean;
  /**
   * An abort settles what was handed out as `gone` (a client's late answer is then refused as stale): a
   * forwarded delivery the owner withdrew, or whose channel closed.
   */
  withdrawOnAbort?: boolean;
  /** Told when the client extends a delivery's deadline (a forwarded delivery: the owner waits as long). */
  onExtend?(deadlineMs: number): void;
}

/** How many clients of a subscription are connected here, their windows added up, and the deliveries they hold. */
export interface HubLoad {
  members: number;
  window: number;
  held: number;
}

/**
 * The stream clients connected to this process, and the deliveries they hold. The dispatch loop hands an event
 * of a STREAM subscription to `deliver`, which picks members by the subscription's policy (LOAD_BALANCE: one
 * member with room in its window, round robin; BROADCAST: every connected member), waits for room and for an
 * answer, and reports ack, nack (retry after a delay), reject (straight to the dead-letter queue), or a
 * timeout. Delivery ids carry the owner epoch and a per-process nonce, so an answer for an id this process did
 * not hand out, or already settled, is refused and never matched to a newer delivery.
 */
export class StreamHub implements StreamDeliverer {
  private readonly log = createLogger('StreamHub');
  private readonly members = new Map<string, StreamMember[]>();
  private readonly pending = new Map<string, Pending>();
  private readonly roomWaiters = new Set<() => void>();
  /** Unanswered deliveries per member, counted the moment the member is chosen (choosing and sending are not atomic). */
  private readonly held = new Map<StreamMember, number>();
  private readonly nonce = randomUUID().slice(0, 8);
  private sequence = 0;
  private cursor = 0;
  private readonly listeners = new Set<(subscriptionId: string) => void>();
  private readonly since = new Map<StreamMember, Date>();

  constructor(private readonly epoch = 0) {}

  connect(member: StreamMember): void {
    const list = this.members.get(member.subscriptionId) ?? [];
    list.push(member);
    this.members.set(member.subscriptionId, list);
    this.since.set(member, new Date());
    this.log.info(
      { subscription: member.subscriptionId, member: member.id, window: member.window },
      'stream client connected',
    );
    this.wakeAll();
    this.changed(member.subscriptionId);
  }

  /** Hears of every connect and disconnect (stream-presence.ts publishes them to the other instances). */
  onMembership(listener: (subscriptionId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The subscriptions with a client connected here. */
  subscriptions(): string[] {
    return [...this.members.keys()];
  }

  load(subscriptionId: string): HubLoad {
    const list = this.members.get(subscriptionId) ?? [];
    return {
      members: list.length,
      window: list.reduce((sum, m) => sum + m.window, 0),
      held: list.reduce((sum, m) => sum + this.inFlight(m), 0),
    };
  }

  private changed(subscriptionId: string): void {
    for (const listener of this.listeners) listener(subscriptionId);
  }

  /** The clients of a subscription connected here, oldest first. */
  clients(subscriptionId: string): StreamClientView[] {
    return (this.members.get(subscriptionId) ?? []).map((m) => ({
      clientId: m.id,
      transport: transportOf(m.id),
      window: m.window,
      inFlight: this.inFlight(m),
      since: (this.since.get(m) ?? new Date()).toISOString(),
    }));
  }

  /**
   * An operator disconnects a client: the hub lets it go (what it held unanswered is `gone`, and delivered again)
   * and its connection is ended. False when no client of that id of the subscription is connected here.
   */
  kick(subscriptionId: string, clientId: string): boolean {
    const member = this.members.get(subscriptionId)?.find((m) => m.id === clientId);
    if (!member) return false;
    this.disconnect(member);
    member.close?.();
    return true;
  }

  /** The member is gone: what it held unanswered is failed (and delivered again later). Once per member. */
  disconnect(member: StreamMember): void {
    if (!this.since.delete(member)) return;
    const list = (this.members.get(member.subscriptionId) ?? []).filter((m) => m !== member);
    if (list.length > 0) this.members.set(member.subscriptionId, list);
    else this.members.delete(member.subscriptionId);
    for (const [id, p] of this.pending) if (p.member === member) this.settle(id, { kind: 'gone' });
    this.held.delete(member);
    this.log.info({ subscription: member.subscriptionId, member: member.id }, 'stream client disconnected');
    this.wakeAll();
    this.changed(member.subscriptionId);
  }

  connected(subscriptionId: string): number {
    return this.members.get(subscriptionId)?.length ?? 0;
  }

  /** Answers one delivery; false when the id is unknown here or already answered (a stale answer). */
  answer(deliveryId: string, outcome: StreamOutcome): boolean {
    return this.settle(deliveryId, outcome);
  }

  /**
   * Sets a pending delivery's ack deadline to `deadlineMs` from now (its ack timeout starts again, with that length);
   * false when the id is unknown here or already settled.
   */
  extend(deliveryId: string, deadlineMs: number): boolean {
    const p = this.pending.get(deliveryId);
    if (!p) return false;
    clearTimeout(p.timer);
    p.timer = setTimeout(p.expire, deadlineMs);
    p.extended?.(deadlineMs);
    return true;
  }

  /** What a client sent for a delivery of `subscriptionId`: false when no such delivery is pending here. */
  act(subscriptionId: string, deliveryId: string, action: ClientAction): boolean {
    if (this.subscriptionOf(deliveryId) !== subscriptionId) return false;
    return action.kind === 'extend' ? this.extend(deliveryId, action.deadlineMs) : this.answer(deliveryId, action);
  }

  /** Which subscription a pending delivery belongs to, if it is pending. */
  subscriptionOf(deliveryId: string): string | undefined {
    return this.pending.get(deliveryId)?.member.subscriptionId;
  }

  deliver(
    subscription: StreamTarget,
    frame: EventFrame,
    signal?: AbortSignal,
    options: DeliverOptions = {},
  ): Promise<StreamOutcome> {
    return (
      this.deliverNow(subscription, frame, signal, options) ??
      this.deliverWhenRoom(subscription, frame, signal, options)
    );
  }

  /**
   * LOAD_BALANCE with a member that has room now (for a batch, one that takes batches): handed to it in this turn, no
   * promise but its answer's; a batch as one delivery (one place in its window). Undefined (nothing handed out)
   * otherwise: another policy, an aborted signal, or no such member with room.
   */
  deliverNow(
    subscription: StreamTarget,
    what: EventFrame | StreamBatch,
    signal?: AbortSignal,
    options: DeliverOptions = {},
  ): Promise<StreamOutcome> | undefined {
    const policy = (subscription.config as { policy?: StreamPolicy }).policy;
    if (policy === 'BROADCAST' || policy === 'MULTICAST' || signal?.aborted) return undefined;
    const member = this.withRoom(subscription.id, 'one', isBatch(what) ? takesBatches : undefined)?.[0];
    return member && this.sendOf(subscription, what, signal, options)(member);
  }

  deliverBatch(
    subscription: StreamTarget,
    batch: StreamBatch,
    signal?: AbortSignal,
    options: DeliverOptions = {},
  ): Promise<StreamOutcome> {
    return (
      this.deliverNow(subscription, batch, signal, options) ??
      this.deliverBatchWhenRoom(subscription, batch, signal, options)
    );
  }

  /**
   * While a member that takes batches is connected, the batch waits (once, not once per event) for room: in one of
   * them (the batch goes whole), or in a member that takes events (it goes event by event, so those clients are not
   * passed over while the batch takers are full). Nobody that takes batches, BROADCAST, MULTICAST: event by event.
   */
  private async deliverBatchWhenRoom(
    subscription: StreamTarget,
    batch: StreamBatch,
    signal: AbortSignal | undefined,
    options: DeliverOptions,
  ): Promise<StreamOutcome> {
    const policy = (subscription.config as { policy?: StreamPolicy }).policy;
    const taker = () => (this.members.get(subscription.id) ?? []).some(takesBatches);
    if (policy !== 'BROADCAST' && policy !== 'MULTICAST' && taker()) {
      const found = await this.waitFor<StreamMember | 'events'>(
        () =>
          this.withRoom(subscription.id, 'one', takesBatches)?.[0] ??
          ((this.members.get(subscription.id) ?? []).some((m) => !takesBatches(m) && this.inFlight(m) < m.window)
            ? 'events'
            : undefined),
        signal,
        () => !taker(),
      );
      if (found !== undefined && found !== 'events') return this.sendOf(subscription, batch, signal, options)(found);
      if (signal?.aborted) return { kind: 'gone' };
    }
    return eventByEvent(batch, (frame) => this.deliver(subscription, frame, signal, options));
  }

  private sendOf(
    subscription: StreamTarget,
    what: EventFrame | StreamBatch,
    signal: AbortSignal | undefined,
    options: DeliverOptions,
  ): (m: StreamMember) => Promise<StreamOutcome> {
    const ackTimeoutMs = ackTimeoutOf(subscription);
    const epoch = options.epoch ?? this.epoch;
    const cancel = options.withdrawOnAbort ? signal : undefined;
    return (m) => this.send(m, what, ackTimeoutMs, epoch, cancel, options.onExtend);
  }

  private async deliverWhenRoom(
    subscription: StreamTarget,
    frame: EventFrame,
    signal: AbortSignal | undefined,
    options: DeliverOptions,
  ): Promise<StreamOutcome> {
    const config = subscription.config as { policy?: StreamPolicy };
    const nobody = () => options.onlyIfConnected === true && this.connected(subscription.id) === 0;
    const send = this.sendOf(subscription, frame, signal, options);
    if (config.policy === 'BROADCAST' || config.policy === 'MULTICAST') {
      // MULTICAST: the connected clients whose filter matches; when none does, the event is nobody's and settled.
      const wanted = config.policy === 'MULTICAST' ? (m: StreamMember) => m.filter?.matches(frame) ?? true : () => true;
      const targets = await this.waitFor(() => this.withRoom(subscription.id, 'all', wanted), signal, nobody);
      if (!targets) return { kind: 'gone' };
      return combineOutcomes(await Promise.all(targets.map(send)));
    }
    const member = await this.waitFor(() => this.withRoom(subscription.id, 'one')?.[0], signal, nobody);
    if (!member) return { kind: 'gone' };
    return send(member);
  }

  /** Hands `what` (an event, or a batch to a member that takes batches) to `member`; resolves with its answer. */
  private send(
    member: StreamMember,
    what: EventFrame | StreamBatch,
    ackTimeoutMs: number,
    epoch: number,
    cancel?: AbortSignal,
    extended?: (deadlineMs: number) => void,
  ): Promise<StreamOutcome> {
    const deliveryId = `${epoch}.${this.nonce}.${++this.sequence}`;
    return new Promise<StreamOutcome>((resolve) => {
      const expire = () => {
        if (this.settle(deliveryId, { kind: 'timeout' })) member.expired?.(deliveryId);
      };
      this.pending.set(deliveryId, { member, resolve, timer: setTimeout(expire, ackTimeoutMs), expire, extended });
      if (cancel) {
        const onAbort = () => this.settle(deliveryId, { kind: 'gone' });
        if (cancel.aborted) return onAbort();
        cancel.addEventListener('abort', onAbort, { once: true });
        this.pending.get(deliveryId)!.resolve = (outcome) => {
          cancel.removeEventListener('abort', onAbort);
          resolve(outcome);
        };
      }
      if (isBatch(what)) member.pushBatch!({ deliveryId, entries: what.entries });
      else member.push({ deliveryId, frame: what });
    });
  }

  private settle(deliveryId: string, outcome: StreamOutcome): boolean {
    const p = this.pending.get(deliveryId);
    if (!p) return false;
    this.pending.delete(deliveryId);
    this.held.set(p.member, Math.max(0, (this.held.get(p.member) ?? 1) - 1));
    clearTimeout(p.timer);
    p.resolve(outcome);
    this.wakeAll();
    return true;
  }

  private inFlight(member: StreamMember): number {
    return this.held.get(member) ?? 0;
  }

  private hold(members: StreamMember[]): StreamMember[] {
    for (const m of members) this.held.set(m, this.inFlight(m) + 1);
    return members;
  }

  /**
   * Members with room: one (round robin) of those `wanted` picks, or `all` the connected ones it picks, once every one
   * of them has room. Undefined means wait (nobody connected, or no room yet).
   */
  private withRoom(
    subscriptionId: string,
    which: 'one' | 'all',
    wanted?: (m: StreamMember) => boolean,
  ): StreamMember[] | undefined {
    const list = this.members.get(subscriptionId) ?? [];
    if (list.length === 0) return undefined;
    if (which === 'all') {
      const targets = wanted ? list.filter(wanted) : list;
      return targets.every((m) => this.inFlight(m) < m.window) ? this.hold(targets) : undefined;
    }
    for (let i = 0; i < list.length; i++) {
      const m = list[(this.cursor + i) % list.length];
      if (this.inFlight(m) < m.window && (!wanted || wanted(m))) {
        this.cursor = (this.cursor + i + 1) % list.length;
        return this.hold([m]);
      }
    }
    return undefined;
  }

  /** Waits until `pick` finds something (a member connected, or room freed), or the signal aborts. */
  private async waitFor<T>(
    pick: () => T | undefined,
    signal?: AbortSignal,
    giveUp: () => boolean = () => false,
  ): Promise<T | undefined> {
    for (;;) {
      const found = pick();
      if (found !== undefined) return found;
      if (signal?.aborted || giveUp()) return undefined;
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.roomWaiters.delete(wake);
          signal?.removeEventListener('abort', wake);
          resolve();
        };
        this.roomWaiters.add(wake);
        signal?.addEventListener('abort', wake, { once: true });
      });
    }
  }

  private wakeAll(): void {
    for (const wake of [...this.roomWaiters]) wake();
  }
}

const takesBatches = (m: StreamMember): boolean => m.pushBatch !== undefined;

const isBatch = (what: EventFrame | StreamBatch): what is StreamBatch => 'entries' in what;

/** A batch delivered event by event: every event handed out at once, the answers combined. */
export function eventByEvent(
  batch: StreamBatch,
  deliver: (frame: EventFrame) => Promise<StreamOutcome>,
): Promise<StreamOutcome> {
  return Promise.all(batch.frames.map(deliver)).then(combineOutcomes);
}

function transportOf(clientId: string): StreamTransport {
  return clientId.startsWith('ws:') ? 'websocket' : clientId.startsWith('sse:') ? 'sse' : 'long-poll';
}

/** A subscription's ack timeout: how long a client may hold a delivery unanswered. */
export function ackTimeoutOf(subscription: StreamTarget): number {
  return (subscription.config as { ackTimeoutMs?: number }).ackTimeoutMs ?? 30000;
}

/** One answer for a delivery to several clients (BROADCAST, MULTICAST): a reject wins, then any failure, else ack. */
export function combineOutcomes(outcomes: StreamOutcome[]): StreamOutcome {
  return outcomes.find((o) => o.kind === 'reject') ?? outcomes.find((o) => o.kind !== 'ack') ?? { kind: 'ack' };
}

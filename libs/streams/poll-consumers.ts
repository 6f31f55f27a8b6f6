import { ErrorCode, EventMeshError } from '@libs/errors';
import type { CompiledFilter } from '@libs/filter';
import type { StreamDelivery, StreamHub, StreamMember } from './stream-hub';

/** How long a long-poll consumer that stopped polling stays connected (its unanswered deliveries with it). */
const IDLE_MS = 60000;

class PollConsumer implements StreamMember {
  readonly queue: StreamDelivery[] = [];
  private wake?: () => void;
  idleTimer?: NodeJS.Timeout;
  /** Set by PollConsumers: lets the consumer go (the hub, unless it already did, and its name). */
  close?: () => void;
  /** How many polls had started when each queued delivery was queued, until a poll takes it. */
  private readonly queuedAfter = new Map<string, number>();
  /** Polls started so far. */
  private polls = 0;

  constructor(
    readonly id: string,
    readonly subscriptionId: string,
    readonly window: number,
    readonly filter?: CompiledFilter,
  ) {}

  /** Answers the poll waiting now, if any, with what is queued (the gateway closes). */
  answerNow(): void {
    this.wake?.();
  }

  push(delivery: StreamDelivery): void {
    this.queue.push(delivery);
    this.queuedAfter.set(delivery.deliveryId, this.polls);
    this.wake?.();
  }

  /**
   * A delivery passed its ack timeout still queued, and no poll came since it was queued: the client is gone (a
   * killed process) or polls slower than the subscription's ack timeout. It is let go at once, rather than after a
   * minute of idleness, so the hub stops handing it deliveries that can only time out; what it held is delivered
   * again to the members that poll, and its next poll, if any, joins afresh. A client that keeps polling is never
   * let go here, however many of its queued deliveries wait past the timeout.
   */
  expired(deliveryId: string): void {
    const pollsThen = this.queuedAfter.get(deliveryId);
    if (pollsThen === undefined) return; // a poll took it: the client answers late, it is not silent
    if (this.polls === pollsThen) this.close?.();
  }

  /** Up to `max` deliveries: at once if any are queued, else the first to arrive within `waitMs`. */
  async take(max: number, waitMs: number, signal: AbortSignal): Promise<StreamDelivery[]> {
    this.polls++;
    if (this.queue.length === 0 && waitMs > 0 && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          this.wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, waitMs);
        signal.addEventListener('abort', done, { once: true });
        this.wake = done;
      });
    }
    const taken = this.queue.splice(0, max);
    for (const d of taken) this.queuedAfter.delete(d.deliveryId);
    return taken;
  }
}

/**
 * Long-poll consumers: a client names itself (`consumer`) and polls; between polls it stays a member of the
 * subscription, holding the deliveries it has not answered (up to its window), until it has not polled for a
 * minute, or until a delivery queued for it passes the subscription's ack timeout with no poll since it was
 * queued (a client that was killed). Then it is disconnected and what it held is delivered again. A subscription has at most
 * `maxPerSubscription` names at once (a poll without a name takes a fresh one, held for that minute too): a poll
 * with a new name past it is refused with 429 `TOO_MANY_CONSUMERS`, and known names keep polling.
 */
export class PollConsumers {
  private readonly consumers = new Map<string, PollConsumer>();
  private readonly perSubscription = new Map<string, number>();

  constructor(
    private readonly hub: StreamHub,
    private readonly maxPerSubscription: number,
  ) {}

  /** Consumer names held now, over all subscriptions. */
  get size(): number {
    return this.consumers.size;
  }

  /** The consumer's window and filter are the ones of its first poll (until it is disconnected). */
  async poll(
    subscriptionId: string,
    consumer: string,
    window: number,
    max: number,
    waitMs: number,
    signal: AbortSignal,
    filter?: CompiledFilter,
  ): Promise<StreamDelivery[]> {
    const key = `${subscriptionId}/${consumer}`;
    let member = this.consumers.get(key);
    if (!member) {
      const held = this.perSubscription.get(subscriptionId) ?? 0;
      if (held >= this.maxPerSubscription) {
        throw new EventMeshError(
          ErrorCode.TooManyConsumers,
          `subscription ${subscriptionId} has ${held} long-poll consumers, its most; poll with one of their names, or ` +
            'again once one has not polled for a minute',
          { subscriptionId, maxConsumers: this.maxPerSubscription },
        );
      }
      this.perSubscription.set(subscriptionId, held + 1);
      member = new PollConsumer(`poll:${consumer}`, subscriptionId, window, filter);
      const created = member;
      // An operator's disconnect (the hub already let it go), the client fell silent (PollConsumer.expired), or it
      // has not polled for a minute: the name is free, its next poll starts afresh.
      created.close = () => {
        clearTimeout(created.idleTimer);
        if (this.consumers.get(key) !== created) return;
        this.consumers.delete(key);
        const left = (this.perSubscription.get(subscriptionId) ?? 1) - 1;
        if (left > 0) this.perSubscription.set(subscriptionId, left);
        else this.perSubscription.delete(subscriptionId);
        this.hub.disconnect(created);
      };
      this.consumers.set(key, member);
      this.hub.connect(member);
    }
    clearTimeout(member.idleTimer);
    try {
      return await member.take(max, waitMs, signal);
    } finally {
      const m = member;
      if (this.consumers.get(key) === m) {
        m.idleTimer = setTimeout(() => m.close?.(), IDLE_MS);
        m.idleTimer.unref();
      }
    }
  }

  /** The gateway closes: each poll waiting is answered at once, with what it holds (nothing), and every name is let go. */
  close(): void {
    for (const m of this.consumers.values()) {
      m.answerNow();
      clearTimeout(m.idleTimer);
      this.hub.disconnect(m);
    }
    this.consumers.clear();
    this.perSubscription.clear();
  }
}

import { ErrorCode, EventMeshError } from '../errors';
import type { CompiledFilter } from '../filter';
import type { StreamDelivery, StreamHub, StreamMember } from './stream-hub';

/** How long a long-poll consumer that stopped polling stays connected (its unanswered deliveries with it). */
const IDLE_MS = 60000;

class PollConsumer implements StreamMember {
  readonly queue: StreamDelivery[] = [];
  private wake?: () => void;
  idleTimer?: NodeJS.Timeout;
  /** Set by PollConsumers: forgets the consumer's name when an operator disconnects it. */
  close?: () => void;

  constructor(
    readonly id: string,
    readonly subscriptionId: string,
    readonly window: number,
    readonly filter?: CompiledFilter,
  ) {}

  push(delivery: StreamDelivery): void {
    this.queue.push(delivery);
    this.wake?.();
  }

  /** Up to `max` deliveries: at once if any are queued, else the first to arrive within `waitMs`. */
  async take(max: number, waitMs: number, signal: AbortSignal): Promise<StreamDelivery[]> {
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
    return this.queue.splice(0, max);
  }
}

/**
 * Long-poll consumers: a client names itself (`consumer`) and polls; between polls it stays a member of the
 * subscription, holding the deliveries it has not answered (up to its window), until it has not polled for a
 * minute. Then it is disconnected and what it held is delivered again. A subscription has at most
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
      // An operator's disconnect (the hub already let it go): the name is free, its next poll starts afresh.
      created.close = () => {
        clearTimeout(created.idleTimer);
        if (this.consumers.get(key) !== created) return;
        this.consumers.delete(key);
        const left = (this.perSubscription.get(subscriptionId) ?? 1) - 1;
        if (left > 0) this.perSubscription.set(subscriptionId, left);
        else this.perSubscription.delete(subscriptionId);
      };
      this.consumers.set(key, member);
      this.hub.connect(member);
    }
    clearTimeout(member.idleTimer);
    try {
      return await member.take(max, waitMs, signal);
    } finally {
      const m = member;
      m.idleTimer = setTimeout(() => {
        this.consumers.delete(key);
        const left = (this.perSubscription.get(subscriptionId) ?? 1) - 1;
        if (left > 0) this.perSubscription.set(subscriptionId, left);
        else this.perSubscription.delete(subscriptionId);
        this.hub.disconnect(m);
      }, IDLE_MS);
      m.idleTimer.unref();
    }
  }

  close(): void {
    for (const m of this.consumers.values()) {
      clearTimeout(m.idleTimer);
      this.hub.disconnect(m);
    }
    this.consumers.clear();
    this.perSubscription.clear();
  }
}

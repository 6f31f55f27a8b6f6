import type { DataSource } from 'typeorm';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { SubscriptionStore } from '@libs/storage';
import { isUuid, subscriptionNotFound } from './subscription.service';

/** What a pause or resume did: the state after it, and whether it changed anything. */
export interface DeliveryStateView {
  subscriptionId: string;
  /** `PAUSED` or `ACTIVE`. */
  status: string;
  /** False when the subscription already was in that state (the request changes nothing, and is not an error). */
  changed: boolean;
}

/**
 * Pausing and resuming a subscription's delivery: its `status` in Postgres, `ACTIVE` <-> `PAUSED`, so it survives
 * restarts of every instance. The dispatch loops dispatch only `ACTIVE` subscriptions and re-read them every
 * refresh (1 s, libs/delivery/dispatch-loop.ts): at the first refresh after a pause a loop closes the
 * subscription's lanes (their sends in flight are aborted, what they settled is committed), and after a resume
 * it starts them again from the committed offsets, like any new lane. Whoever delivers the partitions, in either
 * topology. A subscription its sink disabled (410 Gone) is neither paused nor resumed: 409 SUBSCRIPTION_DISABLED.
 */
export class SubscriptionDeliveryState {
  private readonly log = createLogger('SubscriptionDeliveryState');

  private readonly store: SubscriptionStore;

  constructor(db: DataSource) {
    this.store = new SubscriptionStore(db);
  }

  pause(id: string, tenant: string, actor: string): Promise<DeliveryStateView> {
    return this.move(id, tenant, actor, 'ACTIVE', 'PAUSED');
  }

  resume(id: string, tenant: string, actor: string): Promise<DeliveryStateView> {
    return this.move(id, tenant, actor, 'PAUSED', 'ACTIVE');
  }

  /** One conditional update from `from` to `to`; when it changes nothing, the stored status says why. */
  private async move(id: string, tenant: string, actor: string, from: string, to: string): Promise<DeliveryStateView> {
    if (!isUuid(id)) throw subscriptionNotFound(id);
    if (await this.store.moveStatus(id, tenant, from, to)) {
      this.log.info(
        { subscription: id, tenant, actor, from, to },
        to === 'PAUSED' ? 'subscription paused by an operator' : 'subscription resumed by an operator',
      );
      return { subscriptionId: id, status: to, changed: true };
    }
    const status = await this.store.statusOf(id, tenant);
    if (status === undefined) throw subscriptionNotFound(id);
    if (status === to) return { subscriptionId: id, status: to, changed: false };
    throw new EventMeshError(
      ErrorCode.SubscriptionDisabled,
      `subscription ${id} is ${status} (its sink answered 410 Gone); it is not delivered, and cannot be ${to === 'PAUSED' ? 'paused' : 'resumed'}`,
      { id, status },
    );
  }
}

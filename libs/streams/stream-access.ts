import { ErrorCode, EventMeshError } from '@libs/errors';
import type { SubscriptionService } from '@libs/subscriptions';

/**
 * A stream client may attach only to an active STREAM subscription of its tenant, on any instance that runs the
 * gateway (the dispatching instance reaches it over the internal channel, cluster-stream-router.ts); another
 * tenant's subscription is 404 SUBSCRIPTION_NOT_FOUND, like a missing one (checked first, so no other answer
 * tells it exists).
 */
export async function assertStreamHere(subscriptions: SubscriptionService, id: string, tenant: string): Promise<void> {
  const s = await subscriptions.get(id, tenant);
  if (s.protocol !== 'STREAM') {
    throw new EventMeshError(ErrorCode.InvalidRequest, `subscription ${id} is not a STREAM subscription`, {
      field: 'protocol',
    });
  }
  if (s.status !== 'ACTIVE')
    throw new EventMeshError(ErrorCode.SubscriptionNotActive, `subscription ${id} is ${s.status}`, {
      status: s.status,
    });
}

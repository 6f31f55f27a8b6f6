import { ErrorCode, EventMeshError } from '../errors';
import type { SubscriptionService } from '../subscriptions';

/** A stream client may attach only to an active STREAM subscription that this instance dispatches. */
export async function assertStreamHere(subscriptions: SubscriptionService, id: string): Promise<void> {
  const s = await subscriptions.get(id);
  if (s.protocol !== 'STREAM') {
    throw new EventMeshError(ErrorCode.InvalidRequest, `subscription ${id} is not a STREAM subscription`, { field: 'protocol' });
  }
  if (s.instance !== subscriptions.instanceId) {
    throw new EventMeshError(ErrorCode.WrongInstance, `subscription ${id} is served by instance ${s.instance}; connect there`, {
      instance: s.instance,
    });
  }
  if (s.status !== 'ACTIVE') throw new EventMeshError(ErrorCode.InvalidRequest, `subscription ${id} is ${s.status}`, { status: s.status });
}

import { EventMeshClient, NotFoundError } from '@eventmesh/client';
import type { MeshClientPort, StreamSubscriptionSpec } from './mesh-client-port';

/**
 * The module's port over the SDK's client. A decorated method's subscription is ensured by its name
 * (`subscriptions.ensure`, `PUT /subscriptions/by-name/{name}`): one subscription per name, the same one after
 * every restart and in every process of the app, however many handlers share a topic and filters.
 */
export function sdkPort(client: EventMeshClient): MeshClientPort {
  return {
    async ensureStreamSubscription(spec: StreamSubscriptionSpec) {
      const subscription = await client.subscriptions.ensure({
        name: spec.name,
        protocol: 'STREAM',
        topic: spec.topic,
        filters: spec.filters,
        ...(spec.policy ? { config: { policy: spec.policy } } : {}),
      });
      return subscription.id;
    },
    consume: (subscriptionId, handler, options) => client.consume(subscriptionId, handler, options),
    async reply(request, reply) {
      try {
        return (await client.reply(request, reply)).delivered;
      } catch (e) {
        if (e instanceof NotFoundError && e.code === 'REQUEST_NOT_PENDING') return false;
        throw e;
      }
    },
    close: () => client.close(),
  };
}

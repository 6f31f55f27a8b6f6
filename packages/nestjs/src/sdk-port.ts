import { EventMeshClient, NotFoundError } from '@eventmesh/client';
import type { MeshClientPort, StreamSubscriptionSpec } from './mesh-client-port';

/**
 * The module's port over the SDK's client. The runtime's subscriptions have no name, and the SDK's
 * `subscriptions.ensure` finds a subscription by what it does (protocol, topic, filters, policy); two handlers
 * with the same topic and filters would then share one subscription and split its events. So the name goes into
 * the filters as a filter that every event passes (`not` an `exact` match of an extension attribute no event
 * carries: `nestjssubscription`), which makes `ensure` idempotent by name: one subscription per name, the same one
 * after every restart and in every process of the app.
 */
export function sdkPort(client: EventMeshClient): MeshClientPort {
  return {
    async ensureStreamSubscription(spec: StreamSubscriptionSpec) {
      const subscription = await client.subscriptions.ensure({
        protocol: 'STREAM',
        topic: spec.topic,
        filters: [...spec.filters, nameFilter(spec.name)],
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

/** The filter that carries a subscription's name (see above): it matches every event without that attribute. */
export function nameFilter(name: string): { not: { exact: Record<string, string> } } {
  return { not: { exact: { nestjssubscription: name } } };
}

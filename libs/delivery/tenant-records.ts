import type { CompiledFilter } from '@libs/filter';
import { TENANT_EXTENSION } from '@libs/frame';
import type { SubscriptionEntity } from '@libs/storage';

/** A topic the runtime writes about every tenant (the audit topic): each tenant reads its own events of it. */
export interface TenantRecordsTopic {
  topic: string;
  /** The tenant that reads every event of it. */
  operatorTenant: string;
}

/**
 * The filter a subscription's events pass in the runtime's delivery, before any sink sees them: on a topic of
 * tenant records, a subscription of another tenant than the operator's gets only the events whose
 * `eventmeshtenant` extension names its own tenant (an event without one is nobody's), whatever filters it asked
 * for. The reader cannot widen it: it is applied here, not stored with the subscription.
 */
export function ownRecordsOnly(
  subscription: SubscriptionEntity,
  filter: CompiledFilter,
  scoped: TenantRecordsTopic | undefined,
): CompiledFilter {
  if (!scoped || subscription.topic !== scoped.topic || subscription.tenant === scoped.operatorTenant) return filter;
  const tenant = subscription.tenant;
  return {
    filters: filter.filters,
    matches: (frame) => frame.extensions[TENANT_EXTENSION] === tenant && filter.matches(frame),
  };
}

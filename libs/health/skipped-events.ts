import type { SkippedRangeStore } from '@libs/storage';
import type { HealthFinding, HealthWarning } from './health.service';

/** Subscriptions a warning names at most; the totals count every one. */
const LISTED = 20;

/**
 * The `/health` warning about events Kafka retention deleted before a subscription got them (the skipped ranges
 * the dispatch loops recorded): how many, for which subscriptions, since when. Skips recorded within `windowMs`
 * count (`EVENTMESH_DELIVERY_SKIP_WARNING_MS`); none, no warning. If the record cannot be read, HealthService
 * says so with `SKIPPED_EVENTS_UNKNOWN`: silence would read as "nothing was skipped".
 *
 * `/health` is public: with `listSubscriptions` false (a gate is on, so tenants are told apart) the warning gives
 * the totals only, and each tenant reads its own subscriptions' ranges at GET /subscriptions/{id}/skipped-ranges.
 */
export function skippedEventsFinding(
  store: SkippedRangeStore,
  windowMs: number,
  listSubscriptions = true,
): HealthFinding {
  return {
    unknownCode: 'SKIPPED_EVENTS_UNKNOWN',
    read: async () => {
      const warning = await skippedEventsWarning(store, windowMs, listSubscriptions);
      return { warnings: warning ? [warning] : [] };
    },
  };
}

async function skippedEventsWarning(
  store: SkippedRangeStore,
  windowMs: number,
  listSubscriptions: boolean,
  now = Date.now(),
): Promise<HealthWarning | undefined> {
  const report = await store.recordedSince(new Date(now - windowMs), LISTED);
  if (report.subscriptions === 0) return undefined;
  const since = new Date(Math.min(...report.latest.map((s) => s.since.getTime())));
  const latest = new Date(Math.max(...report.latest.map((s) => s.latest.getTime())));
  return {
    code: 'EVENTS_SKIPPED',
    message:
      `Kafka retention deleted ${report.events} event(s) before delivery, for ${report.subscriptions} subscription(s), ` +
      `since ${since.toISOString()} (latest ${latest.toISOString()}); GET /subscriptions/{id}/skipped-ranges lists them`,
    events: report.events,
    subscriptionCount: report.subscriptions,
    since: since.toISOString(),
    latest: latest.toISOString(),
    windowMs,
    ...(listSubscriptions
      ? {
          subscriptions: report.latest.map((s) => ({
            id: s.subscriptionId,
            events: s.events,
            ranges: s.ranges,
            since: s.since.toISOString(),
            latest: s.latest.toISOString(),
          })),
        }
      : {}),
  };
}

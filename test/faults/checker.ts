/**
 * The checker, in the style of Jepsen's: from what the publishers were told (the acknowledged log) and what each
 * subscription's clients received, it counts, per subscription:
 *
 * - `lost`: acknowledged (202) but never delivered. The runtime promises this is 0.
 * - `duplicates`: deliveries beyond the first of an event (at least once allows them; counted).
 * - `orderViolations`, only where order is promised (a webhook subscription delivers each partition in order,
 *   docs/delivery.md; a stream subscription does not promise order): an acknowledged event whose first delivery
 *   came after the first delivery of a later event of the same key (a higher `seq`). Redeliveries of earlier
 *   events (after a crash, from the committed offset) are duplicates, not violations.
 * - `unacknowledgedDelivered`: delivered although the publisher was not told 202 (a 503 or a timeout for an event
 *   Kafka may have written anyway; allowed, counted).
 * - `unknown`: delivered but never published by this workload (must be 0: another run's event, or corruption).
 *
 * Pure: no I/O, no clock. test/faults/checker.spec.ts checks it with hand-made logs.
 */

export interface PublishRecord {
  id: string;
  key: string;
  seq: number;
  /** The publisher was answered 202 (on some attempt). */
  acknowledged: boolean;
}

export interface Delivery {
  id: string;
}

export interface SubscriptionLog {
  name: string;
  transport: 'webhook' | 'websocket' | 'sse' | 'long-poll' | string;
  /** Whether the runtime promises per-key (per-partition) order for this subscription. */
  ordered: boolean;
  /** Every delivery the subscription's clients received, in the order they received them. */
  deliveries: Delivery[];
}

export interface SubscriptionResult {
  name: string;
  transport: string;
  acknowledged: number;
  /** Distinct acknowledged events delivered at least once. */
  delivered: number;
  lost: number;
  duplicates: number;
  /** null where order is not promised. */
  orderViolations: number | null;
  unacknowledgedDelivered: number;
  unknown: number;
  /** Up to 10 ids of lost events, for the report. */
  lostSample: string[];
  /** Up to 5 violations as `key: seq a after seq b`. */
  orderSample: string[];
}

export interface CheckResult {
  published: number;
  acknowledged: number;
  subscriptions: SubscriptionResult[];
  lost: number;
  duplicates: number;
  orderViolations: number;
  /** True when nothing acknowledged was lost, no order promise was broken, and nothing unknown arrived. */
  valid: boolean;
}

export function check(published: PublishRecord[], subscriptions: SubscriptionLog[]): CheckResult {
  const byId = new Map<string, PublishRecord>();
  for (const p of published) {
    const seen = byId.get(p.id);
    // One id may appear once per attempt; it is acknowledged if any attempt was.
    byId.set(p.id, seen ? { ...seen, acknowledged: seen.acknowledged || p.acknowledged } : p);
  }
  const acknowledged = [...byId.values()].filter((p) => p.acknowledged);
  const results = subscriptions.map((s) => checkSubscription(s, byId, acknowledged));
  const sum = (f: (r: SubscriptionResult) => number) => results.reduce((n, r) => n + f(r), 0);
  const lost = sum((r) => r.lost);
  const orderViolations = sum((r) => r.orderViolations ?? 0);
  return {
    published: byId.size,
    acknowledged: acknowledged.length,
    subscriptions: results,
    lost,
    duplicates: sum((r) => r.duplicates),
    orderViolations,
    valid: lost === 0 && orderViolations === 0 && sum((r) => r.unknown) === 0,
  };
}

function checkSubscription(
  log: SubscriptionLog,
  byId: Map<string, PublishRecord>,
  acknowledged: PublishRecord[],
): SubscriptionResult {
  const counts = new Map<string, number>();
  let unknown = 0;
  /** The highest seq first-delivered so far per key, among acknowledged events. */
  const highest = new Map<string, number>();
  let orderViolations = 0;
  const orderSample: string[] = [];
  for (const d of log.deliveries) {
    const published = byId.get(d.id);
    if (!published) {
      unknown++;
      continue;
    }
    const n = (counts.get(d.id) ?? 0) + 1;
    counts.set(d.id, n);
    if (n > 1 || !published.acknowledged) continue;
    const top = highest.get(published.key);
    if (top !== undefined && published.seq < top) {
      orderViolations++;
      if (orderSample.length < 5) orderSample.push(`${published.key}: seq ${published.seq} after seq ${top}`);
    } else {
      highest.set(published.key, published.seq);
    }
  }
  const lostIds = acknowledged.filter((p) => !counts.has(p.id)).map((p) => p.id);
  let duplicates = 0;
  let unacknowledgedDelivered = 0;
  for (const [id, n] of counts) {
    duplicates += n - 1;
    if (!byId.get(id)!.acknowledged) unacknowledgedDelivered++;
  }
  return {
    name: log.name,
    transport: log.transport,
    acknowledged: acknowledged.length,
    delivered: acknowledged.length - lostIds.length,
    lost: lostIds.length,
    duplicates,
    orderViolations: log.ordered ? orderViolations : null,
    unacknowledgedDelivered,
    unknown,
    lostSample: lostIds.slice(0, 10),
    orderSample: log.ordered ? orderSample : [],
  };
}

/** The checker's table, in Markdown. */
export function formatTable(result: CheckResult): string {
  const lines = [
    `published ${result.published}, acknowledged ${result.acknowledged}: lost ${result.lost}, duplicates ${result.duplicates}, order violations ${result.orderViolations} -> ${result.valid ? 'VALID' : 'INVALID'}`,
    '',
    '| subscription | transport | acknowledged | delivered | lost | duplicates | order violations | unacked delivered | unknown |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of result.subscriptions) {
    const order = r.orderViolations === null ? 'n/a' : String(r.orderViolations);
    lines.push(
      `| ${r.name} | ${r.transport} | ${r.acknowledged} | ${r.delivered} | ${r.lost} | ${r.duplicates} | ${order} | ${r.unacknowledgedDelivered} | ${r.unknown} |`,
    );
  }
  for (const r of result.subscriptions) {
    if (r.lostSample.length > 0)
      lines.push(`lost at ${r.name}: ${r.lostSample.join(', ')}${r.lost > r.lostSample.length ? ', ...' : ''}`);
    if (r.orderSample.length > 0) lines.push(`order at ${r.name}: ${r.orderSample.join('; ')}`);
  }
  return lines.join('\n');
}

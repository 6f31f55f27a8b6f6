import { partitionKeyOf } from '@libs/frame';
import type { SubscriptionEntity } from '@libs/storage';
import type { HeldKey } from './held-keys';
import { STREAM_LANE_DEPTH, type Lane, type LaneRecord } from './lane';

/**
 * How a webhook subscription's events may overtake each other within a partition (`config.ordering`):
 * - `partition` (the default): one delivery out at a time per partition, in offset order; a failing event holds
 *   the partition until it succeeds or is parked.
 * - `key`: events of one partition key in offset order, up to the lane's concurrency of different keys at once;
 *   a failing key holds only itself, and once its event is parked the key's later events are parked behind it,
 *   in order, and delivered after it (held-keys.ts).
 * - `none`: up to the lane's concurrency of deliveries at once; a failing event holds nothing but itself.
 * In every mode the lane's offset is the lowest offset it has not settled (acknowledged, passed over, parked or
 * dead-lettered). A STREAM subscription delivers like `none` with a window of {@link STREAM_LANE_DEPTH} (its
 * clients' windows do the flow control).
 */
export const ORDERINGS = ['partition', 'key', 'none'] as const;
export type Ordering = (typeof ORDERINGS)[number];

/** Deliveries a `key` or `none` lane has out at once when neither the subscription nor the instance says. */
export const DEFAULT_LANE_CONCURRENCY = 16;

export function orderingOf(subscription: SubscriptionEntity): Ordering {
  if (subscription.protocol === 'STREAM') return 'none';
  const own = (subscription.config as { ordering?: Ordering } | undefined)?.ordering;
  return own ?? 'partition';
}

/** How many deliveries the lane has out at most: its subscription's `config.concurrency`, else the instance's. */
export function depthOf(lane: Lane, defaultConcurrency = DEFAULT_LANE_CONCURRENCY): number {
  if (lane.subscription.protocol === 'STREAM') return STREAM_LANE_DEPTH;
  if (orderingOf(lane.subscription) === 'partition') return 1;
  return (lane.subscription.config as { concurrency?: number } | undefined)?.concurrency ?? defaultConcurrency;
}

/**
 * The key a record is ordered by: the event's partition key (its `partitionkey` extension, else its `source`),
 * which is the Kafka record key of every event this runtime writes, and which a parked copy keeps. A record that is
 * not an event has no key: it is ordered only with itself.
 */
export function keyOf(record: LaneRecord): string {
  if (record.key === undefined) record.key = record.frame ? `k:${partitionKeyOf(record.frame)}` : `o:${record.offset}`;
  return record.key;
}

/** What a lane may start now: a record to its sink, a record parked behind its held key, or a held key's head. */
export type Work =
  | { kind: 'send'; record: LaneRecord }
  | { kind: 'park-behind'; record: LaneRecord; key: string }
  | { kind: 'held'; key: string; held: HeldKey };

/**
 * The work a lane may start now, at most `budget` items, in offset order within each key. A record that waits for
 * its retry stops a `partition` lane; in a `key` lane it stops its key (and the later records of that key); in a
 * `none` lane, nothing else.
 */
export function startable(lane: Lane, ordering: Ordering, budget: number, now: number): Work[] {
  const work: Work[] = [];
  if (budget <= 0) return work;
  if (ordering === 'key') {
    for (const [key, held] of lane.held) {
      if (work.length >= budget) return work;
      if (!held.sending && held.queue[0].nextAttemptAt.getTime() <= now) work.push({ kind: 'held', key, held });
    }
  }
  // Keys with an earlier record that is not settled: their later records wait behind it.
  const ahead = ordering === 'key' ? new Set<string>() : undefined;
  for (const record of lane.buffer) {
    if (work.length >= budget) break;
    if (record.state === 'settled') continue;
    if (ahead) {
      const key = keyOf(record);
      if (ahead.has(key)) continue;
      ahead.add(key);
      if (record.state !== undefined || (record.retryAt ?? 0) > now) continue;
      work.push(lane.held.has(key) ? { kind: 'park-behind', record, key } : { kind: 'send', record });
      continue;
    }
    if (record.state !== undefined) {
      if (ordering === 'partition') break;
      continue;
    }
    if ((record.retryAt ?? 0) > now) {
      if (ordering === 'partition') break;
      continue;
    }
    work.push({ kind: 'send', record });
  }
  return work;
}

import type { CompiledFilter } from '@libs/filter';
import type { EventFrame } from '@libs/frame';
import type { ParkedDelivery, SubscriptionEntity } from '@libs/storage';
import type { HeldKey } from './held-keys';

/**
 * Deliveries a stream lane has out at once (a webhook lane's follow its subscription's ordering, ordering.ts): the
 * clients' windows do the flow control (libs/streams), and a round trip to a client no longer bounds a partition's
 * rate. As many as a client's largest window: a client that writes what it holds in batches (a sink) gets batches
 * that large; with 32, a partition's events reached it 32 per round trip. Its offset still moves only over events
 * that are settled.
 */
export const STREAM_LANE_DEPTH = 1000;

/**
 * One subscription in one partition: its own cursor, buffer and retry state, so a slow or failing sink holds
 * back nothing but itself.
 */
export interface Lane {
  subscription: SubscriptionEntity;
  /** The subscription's filters; an event they do not match is passed over, not delivered. */
  filter: CompiledFilter;
  topic: string;
  partition: number;
  /** The next offset to settle (deliver, or dead-letter). */
  nextOffset: number;
  /** What Postgres holds. */
  committed: number;
  /**
   * The subscription's offsets generation the lane started from; its commits carry it. An operator's seek raises the
   * subscription's, and the loop then restarts the lane from the new offsets (dispatch-loop.ts, `refresh`).
   */
  generation: number;
  /** Records from `nextOffset` on, in order; the settled ones leave once every record before them has settled. */
  buffer: LaneRecord[];
  /**
   * Offsets at or after where the lane started that were dead-lettered before (by a run that crashed before its
   * commit): settled for good, so the replay passes over them. Each leaves the set when the lane reaches it.
   */
  deadLettered: Set<number>;
  busy: boolean;
  /** The lane starts nothing before this: a webhook lane's first record waits for its retry, or a storage write failed. */
  retryAt: number;
  abort: AbortController;
  /** The signal of this lane's sends (the lane runner's `sendSignalOf`). */
  send?: { gate: AbortSignal; signal: AbortSignal };
  highWatermark: number;
  /** While the lane is draining with deliveries out: wakes it to start records that arrived since. */
  nudge?: () => void;
  /**
   * Set when the lane starts, when the subscription's breaker opens, and when the lane is held at the parking cap:
   * before any new event, the lane delivers the subscription's parked deliveries of its partition, in offset
   * order (ordered recovery, lane-runner.ts); cleared when none is left.
   */
  recovering?: boolean;
  /** `key` ordering: the keys whose events wait in the retry table, each in offset order (held-keys.ts). */
  held: Map<string, HeldKey>;
}

/** A record in a lane, and where its delivery stands. */
export interface LaneRecord {
  offset: number;
  frame?: EventFrame;
  error?: string;
  value: Buffer | null;
  /** The Kafka record's time (epoch ms): when it was published, for the publish-to-ack latency. */
  timestamp?: number;
  /** Out to the sink now, or settled (acknowledged, passed over, parked or dead-lettered). */
  state?: 'sending' | 'settled';
  /** Failed attempts so far, the first failure, and when the next attempt may start. */
  attempts?: number;
  firstFailedAt?: Date;
  retryAt?: number;
  /** The key it is ordered by (ordering.ts, `keyOf`), once asked. */
  key?: string;
  /** Set when the failure policy parked it: the copy in the retry table. */
  parked?: ParkedDelivery;
}

/**
 * A lane record with every member present from the start (`undefined` where not set), as a literal: `state` and the
 * others are written as the record is sent and settled, and a record that gains a member then changes its hidden
 * class; one made by a spread (`{ ...record }`, the lane's copy of a fetched record) took about 1 µs per record
 * to gain `state` (V8 in Node 20, measured alone: 1,000 ns against 50 per record through a send and a settle).
 */
export function laneRecord(
  offset: number,
  from: Pick<LaneRecord, 'frame' | 'error' | 'value' | 'timestamp'>,
): LaneRecord {
  return {
    offset,
    frame: from.frame,
    error: from.error,
    value: from.value,
    timestamp: from.timestamp,
    state: undefined,
    attempts: undefined,
    firstFailedAt: undefined,
    retryAt: undefined,
    key: undefined,
    parked: undefined,
  };
}

export function newLane(
  subscription: SubscriptionEntity,
  filter: CompiledFilter,
  partition: number,
  nextOffset: number,
  deadLettered: Iterable<number> = [],
  generation = 0,
): Lane {
  return {
    subscription,
    filter,
    topic: subscription.topic,
    partition,
    nextOffset,
    committed: nextOffset,
    generation,
    buffer: [],
    deadLettered: new Set(deadLettered),
    busy: false,
    retryAt: 0,
    abort: new AbortController(),
    highWatermark: nextOffset,
    held: new Map(),
  };
}

/**
 * How full a lane is, against its refill mark and its bound (`batchMaxEvents`): every record of its buffer; but a
 * stream lane counts only the records not out to a client yet (and no fewer than its buffer holds beyond
 * {@link STREAM_LANE_DEPTH}). A stream client that answers a window's worth after writing it in one go (a sink)
 * holds those records meanwhile; counted, they filled the lane, and its next records were fetched only after the
 * answers came: stop and wait. So a stream lane fetches what it sends next while its deliveries are out, and holds
 * at most `batchMaxEvents` + STREAM_LANE_DEPTH records.
 */
export function fillOf(lane: Lane): number {
  const all = lane.buffer.length;
  if (lane.subscription.protocol !== 'STREAM') return all;
  let waiting = 0;
  for (const r of lane.buffer) if (r.state === undefined) waiting++;
  return Math.max(waiting, all - STREAM_LANE_DEPTH);
}

/** The first offset a lane lacks: after its buffer, or its next offset when the buffer is empty. */
export const lacksFrom = (lane: Lane): number =>
  lane.buffer.length > 0 ? lane.buffer[lane.buffer.length - 1].offset + 1 : lane.nextOffset;

const laneKey = (subscriptionId: string, topic: string, partition: number) => `${subscriptionId}#${topic}#${partition}`;

/** The lanes of one loop, by subscription partition. */
export class Lanes {
  private readonly byKey = new Map<string, Lane>();

  get(subscriptionId: string, topic: string, partition: number): Lane | undefined {
    return this.byKey.get(laneKey(subscriptionId, topic, partition));
  }

  add(lane: Lane): void {
    this.byKey.set(laneKey(lane.subscription.id, lane.topic, lane.partition), lane);
  }

  values(): IterableIterator<Lane> {
    return this.byKey.values();
  }

  /** Stops what the lane has out, and forgets it. */
  close(lane: Lane): void {
    lane.abort.abort();
    this.byKey.delete(laneKey(lane.subscription.id, lane.topic, lane.partition));
  }

  /** Closes every lane of the subscription. */
  closeSubscription(subscriptionId: string): void {
    for (const lane of [...this.byKey.values()]) if (lane.subscription.id === subscriptionId) this.close(lane);
  }

  /** Aborts every lane's sends (the run ends, or a write was fenced); the lanes stay for the last commit. */
  abortAll(): void {
    for (const lane of this.byKey.values()) lane.abort.abort();
  }

  clear(): void {
    this.byKey.clear();
  }
}

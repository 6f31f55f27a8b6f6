import { setTimeout as sleep } from 'node:timers/promises';
import { frameFromKafkaRecord } from '@libs/frame';
import type { FetchedPartition, FetchedRecord, PartitionPosition } from '@libs/kafka';
import { createLogger } from '@libs/logging';
import type { DispatchContext } from './dispatch-context';
import { fillOf, lacksFrom, Lane, LaneRecord, laneRecord } from './lane';

/**
 * A lane asks Kafka for more only once it is down to this share of `batchMaxEvents` (lane.ts, `fillOf`): a fetch
 * then brings a batch, rather than one record per delivery (every fetch costs a broker round trip and decoding its
 * records).
 */
export const REFILL_BELOW = 0.5;

/** The buffer length under which a lane asks for more (partition-feed.ts, {@link REFILL_BELOW}). */
export const refillAt = (batchMaxEvents: number): number => Math.max(1, Math.floor(batchMaxEvents * REFILL_BELOW));

/**
 * The longest a fetch waits while a lane that did not ask (its buffer is above the refill mark) is moving: the broker
 * holds a fetch of partitions with nothing new for the whole wait, and a lane that runs low meanwhile would wait
 * for it with nothing to deliver (a stream lane went through its 500 records and waited out the rest of 500 ms).
 */
export const MOVING_LANE_FETCH_WAIT_MS = 20;

/** A lane counts as moving for this long after it last delivered something or took records. */
export const MOVING_LANE_FOR_MS = 250;

/**
 * A fetch asks each partition for what its lanes have room for (records times the partition's bytes per record,
 * as last seen), not 1 MiB: kafkajs decodes every record a fetch brings, and the records past the lanes' room were
 * decoded for nothing and fetched again (with 1 KiB events a lane took 250-500 of ~850). At least this much, so a
 * record batch of the producer's mostly fits whole; one that does not makes the next fetch ask for 1 MiB again.
 */
export const MIN_FETCH_BYTES = 128 * 1024;
/** Bytes a record takes in a fetch beyond its key, value and headers (its framing, its batch's header shared). */
const RECORD_OVERHEAD_BYTES = 80;

/**
 * What the lanes read from Kafka: for every partition, the lowest offset a lane that runs low still lacks; the
 * fetched records decoded once, only as far as some lane takes them, and handed to each lane that lacks them; and,
 * when a wanted offset is outside the log, the lanes moved to where the log is.
 */
export class PartitionFeed {
  private readonly log = createLogger('DispatchLoop');

  /** Where each lane stood, and since when (`waitMs`). */
  private readonly marks = new WeakMap<Lane, { mark: string; at: number }>();
  /** Each partition's bytes per record in its last fetch (`topic#partition`): what a fetch of N records asks. */
  private readonly recordBytes = new Map<string, number>();

  constructor(private readonly ctx: DispatchContext) {}

  /**
   * How long the next fetch may wait, at most `maxWaitMs`: {@link MOVING_LANE_FETCH_WAIT_MS} while a lane above the
   * refill mark moved (settled something, or took records) in the last {@link MOVING_LANE_FOR_MS}, so it is refilled
   * soon after it runs low, however long its client takes to answer; a lane that holds its records without moving
   * (a slow sink) makes the loop fetch no more often.
   */
  waitMs(maxWaitMs: number, now = Date.now()): number {
    const refill = refillAt(this.ctx.deps.options.batchMaxEvents);
    let moving = false;
    for (const lane of this.ctx.lanes.values()) {
      const mark = `${lane.nextOffset}:${lacksFrom(lane)}`;
      let last = this.marks.get(lane);
      if (last?.mark !== mark) this.marks.set(lane, (last = { mark, at: now }));
      if (fillOf(lane) >= refill && now - last.at < MOVING_LANE_FOR_MS) moving = true;
    }
    return moving ? Math.min(maxWaitMs, MOVING_LANE_FETCH_WAIT_MS) : maxWaitMs;
  }

  /**
   * The offset each partition must be fetched from: the lowest any lane that runs low on records still lacks; and
   * how many bytes: enough for the records up to where the roomiest of those lanes is full.
   */
  wanted(): PartitionPosition[] {
    const { ctx } = this;
    const lowest = new Map<string, PartitionPosition>();
    /** Per partition: the offset past the last record some lane that runs low has room for. */
    const until = new Map<string, number>();
    const partitions = new Set<string>();
    const { batchMaxEvents } = ctx.deps.options;
    const refill = refillAt(batchMaxEvents);
    for (const lane of ctx.lanes.values()) {
      const k = `${lane.topic}#${lane.partition}`;
      partitions.add(k);
      const fill = fillOf(lane);
      if (fill >= refill) continue;
      // An open breaker: the sink is down, nothing would go out; the lane asks Kafka for nothing meanwhile.
      if (!ctx.breakers.of(lane.subscription.id).admitting) continue;
      const from = lacksFrom(lane);
      const seen = lowest.get(k);
      if (!seen || from < seen.offset) lowest.set(k, { topic: lane.topic, partition: lane.partition, offset: from });
      until.set(k, Math.max(until.get(k) ?? 0, from + batchMaxEvents - fill));
    }
    ctx.progress.partitions = partitions.size;
    for (const [k, position] of lowest) {
      const perRecord = this.recordBytes.get(k);
      if (perRecord === undefined) continue;
      const bytes = (until.get(k)! - position.offset) * perRecord;
      position.maxBytes = Math.min(MAX_FETCH_BYTES, Math.max(MIN_FETCH_BYTES, bytes));
    }
    return [...lowest.values()];
  }

  /** `maxWaitMs` (at most the configured fetch wait) lets the loop keep its next refresh on time. */
  async fetch(
    positions: PartitionPosition[],
    signal: AbortSignal,
    maxWaitMs = this.ctx.deps.options.pollMaxWaitMs,
  ): Promise<FetchedPartition[]> {
    try {
      return await this.ctx.deps.reader.fetch(positions, {
        maxWaitMs: Math.max(0, Math.min(maxWaitMs, this.ctx.deps.options.pollMaxWaitMs)),
      });
    } catch (e) {
      this.log.warn({ error: (e as Error).message }, 'fetch failed; backing off');
      await pause(this.ctx.deps.options.pollMaxWaitMs, signal);
      return [];
    }
  }

  /** Hands fetched records to the lanes that still lack them. */
  async accept(fetched: FetchedPartition[]): Promise<void> {
    const { ctx } = this;
    for (const part of fetched) {
      if (part.outOfRange) {
        await this.realign(part.topic, part.partition);
        continue;
      }
      const k = `${part.topic}#${part.partition}`;
      if (part.records.length > 0) this.recordBytes.set(k, bytesPerRecord(part));
      // Records are there but none fitted (a record batch larger than asked: the broker gives it whole only to
      // the first partition of a fetch that has data): the next fetch asks for the reader's default again.
      else if (part.highWatermark > part.fetchOffset) this.recordBytes.delete(k);
      // Decoded once, and only as far as a lane takes them (a fetch may bring more than any lane has room for).
      const decoded: (LaneRecord | undefined)[] = new Array(part.records.length);
      for (const lane of ctx.lanes.values()) {
        if (lane.topic !== part.topic || lane.partition !== part.partition) continue;
        lane.highWatermark = part.highWatermark;
        const from = lacksFrom(lane);
        // A fetch that started past what this lane still lacks (it was full when the fetch was planned, and
        // drained since) has a gap for it: taking these records would skip the events in between.
        if (part.fetchOffset > from) continue;
        let fill = fillOf(lane);
        for (let i = 0; i < part.records.length; i++) {
          if (part.records[i].offset < from) continue;
          if (fill++ >= ctx.deps.options.batchMaxEvents) break;
          const record = (decoded[i] ??= decode(part.records[i]));
          // Each lane its own copy: where a delivery stands is the lane's (the decoded event is shared).
          lane.buffer.push(laneRecord(record.offset, record));
        }
        lane.nudge?.();
      }
    }
  }

  /**
   * The wanted offset is outside the log: before its start (retention) or past its end (a recreated topic). A
   * lane behind the log start skips the deleted events, and the skipped range is recorded (skipped_ranges, in the
   * loop's fenced transaction) before the lane moves: never silent, counted once however often it is retried.
   */
  private async realign(topic: string, partition: number): Promise<void> {
    const { ctx } = this;
    const [starts, ends] = await Promise.all([ctx.deps.topics.startOffsets(topic), ctx.deps.topics.endOffsets(topic)]);
    const start = starts.get(partition) ?? 0;
    const end = ends.get(partition) ?? 0;
    for (const lane of [...ctx.lanes.values()]) {
      if (lane.topic !== topic || lane.partition !== partition || lane.busy) continue;
      // Its buffer already holds every event up to the log start (fetched before retention deleted them): it
      // skips nothing, whichever lane's fetch fell out of range.
      if (lane.nextOffset < start && lacksFrom(lane) >= start) continue;
      const target = lane.nextOffset < start ? start : lane.nextOffset > end ? end : lane.nextOffset;
      if (target === lane.nextOffset) continue;
      if (target > lane.nextOffset) {
        const range = {
          subscriptionId: lane.subscription.id,
          topic,
          partition,
          fromOffset: lane.nextOffset,
          toOffset: target,
          reason: 'RETENTION' as const,
          epoch: ctx.fence.rowEpoch,
        };
        const recorded = await ctx.fence.run((m) => ctx.deps.skipped.record(range, m));
        if (recorded.rejected === 'SUBSCRIPTION_GONE') {
          ctx.lanes.close(lane);
          continue;
        }
        if (recorded.outcome === 'RECORDED') ctx.progress.skippedRanges++;
        ctx.progress.skippedEvents += recorded.newlySkipped;
      }
      this.log.error(
        {
          subscription: lane.subscription.id,
          topic,
          partition,
          from: lane.nextOffset,
          to: target,
          logStart: start,
          logEnd: end,
        },
        lane.nextOffset < start
          ? 'events were deleted by Kafka retention before delivery; resuming at the first stored offset'
          : 'the stored offset is past the end of the log (was the topic recreated?); resuming at its end',
      );
      lane.buffer = [];
      // Offsets of the old log: new events will take them.
      lane.deadLettered.clear();
      if (target < lane.committed) {
        // The log itself went backwards: the stored offset points at events that no longer exist.
        const position = {
          subscriptionId: lane.subscription.id,
          topic,
          partition,
          nextOffset: target,
          epoch: ctx.fence.rowEpoch,
          generation: lane.generation,
        };
        await ctx.fence.run(async (m) => {
          await ctx.deps.offsets.rewind(position, m);
          // Parked deliveries at those offsets belong to the old log; new events will take their offsets.
          await ctx.deps.retries.forgetFrom(lane.subscription.id, topic, partition, target, m);
        });
        lane.committed = target;
      }
      lane.nextOffset = target;
    }
  }
}

/** The most a fetch asks of a partition: the reader's default. */
const MAX_FETCH_BYTES = 1024 * 1024;

/** A fetched partition's bytes per record: its values' mean size, and the first record's key and headers. */
function bytesPerRecord(part: FetchedPartition): number {
  let values = 0;
  for (const r of part.records) values += r.value?.length ?? 0;
  const first = part.records[0];
  let rest = (first.key?.length ?? 0) + RECORD_OVERHEAD_BYTES;
  for (const name in first.headers) rest += name.length + String(first.headers[name] ?? '').length;
  return Math.ceil(values / part.records.length) + rest;
}

function decode(record: FetchedRecord): LaneRecord {
  try {
    return laneRecord(record.offset, {
      frame: frameFromKafkaRecord(record.headers, record.value),
      value: record.value,
      timestamp: record.timestamp,
    });
  } catch (e) {
    return laneRecord(record.offset, { error: (e as Error).message, value: record.value });
  }
}

/** Waits `ms`, or less if `signal` aborts (the caller checks it). */
export async function pause(ms: number, signal: AbortSignal): Promise<void> {
  try {
    await sleep(ms, undefined, { signal });
  } catch {
    /* aborted: the caller checks the signal */
  }
}

import { CORRELATION_ATTRIBUTE } from '@libs/frame';
import { createLogger } from '@libs/logging';
import type { DispatchContext } from './dispatch-context';
import { FailurePolicy, messageIdOf, retryPolicyOf, verdictOf } from './failure-policy';
import type { Lane, LaneRecord } from './lane';
import { drainLane, type LaneOutcome } from './lane-drain';
import type { LaneRunner } from './lane-runner';
import { keyOf, type Ordering, type Work } from './ordering';
import { batchBytesOf, batchEntryOf, type BatchSettings } from './webhook-batch';

type Outcome = LaneOutcome;

/**
 * Batches a STREAM lane has out at once: the next batches go to the client while it handles one (a sink writing a
 * batch gets the next one meanwhile, instead of the lane's round trip after each). A STREAM subscription's events
 * have no order to keep (ordering.ts).
 */
export const STREAM_BATCH_DEPTH = 4;

/** Batches out at once in a lane: one in a webhook lane (its order), {@link STREAM_BATCH_DEPTH} in a stream lane. */
export const batchDepthOf = (lane: Lane): number => (lane.subscription.protocol === 'STREAM' ? STREAM_BATCH_DEPTH : 1);

/** Consecutive records of a lane going out as one batch, each with its entry (the event in structured JSON). */
interface Batch {
  records: LaneRecord[];
  entries: Buffer[];
}

/**
 * The lanes of batched subscriptions (`config.batch`, webhook-batch.ts). A webhook lane has one batch out at a
 * time, whatever its ordering: a batch holds consecutive events of the partition from the lane's first unsettled
 * one, so with `partition` the partition goes out in order, batch after batch, and with `key` each key's events
 * too. A stream lane has up to {@link STREAM_BATCH_DEPTH} out, each of the events from its first unsettled one that
 * are not out yet (a stream has no order to keep). A batch of one event goes the per-event way (lane-runner.ts), in
 * batch content mode for a webhook.
 *
 * A failed batch is retried as a batch, in the lane, with the subscription's backoff, as an event would be
 * (failure-policy.ts, `verdictOf`). When the event would be parked or dead-lettered instead, the batch is split in
 * two at once, the halves sent one after the other without a backoff, and a half that fails again is split again, down to the event
 * the sink refuses: that one alone takes the per-event path (parked, or dead-lettered after its last attempt, its
 * failed attempts counting those of its batch); its neighbours are delivered. Offsets move only over settled
 * events, so a crash mid-batch redelivers the batch.
 */
export class BatchLanes {
  private readonly log = createLogger('DispatchLoop');

  constructor(
    private readonly ctx: DispatchContext,
    private readonly failures: FailurePolicy,
    private readonly runner: Pick<LaneRunner, 'start' | 'attempt' | 'sendSignalOf'>,
  ) {}

  /**
   * Delivers the lane's buffer batch after batch until nothing is left to start, up to the lane's depth of batches
   * out at once ({@link batchDepthOf}); mirrors LaneRunner's drain.
   */
  async drain(lane: Lane, ordering: Ordering, settings: BatchSettings): Promise<void> {
    const depth = batchDepthOf(lane);
    const { wakeAt, failure } = await drainLane(this.ctx, lane, depth, (room) => {
      const started: Promise<Outcome>[] = [];
      while (started.length < room) {
        const next = this.next(lane, ordering, settings, Date.now(), depth > 1);
        if (next === undefined) break;
        // A batch that is not full lingers: the lane looks again when it has lingered long enough.
        if (typeof next === 'number') return { started, wakeAt: next };
        started.push('kind' in next ? this.runner.start(lane, next) : this.deliver(lane, next, ordering));
      }
      return { started };
    });
    // The lane starts again when its first record's retry is due, or when the batch has lingered long enough.
    const head = lane.buffer.find((r) => r.state !== 'settled');
    lane.retryAt = Math.max(wakeAt, head !== undefined && head.state === undefined ? (head.retryAt ?? 0) : 0);
    if (failure) throw failure.error;
  }

  /**
   * What the lane starts next: a batch of the consecutive events from its first unsettled record; one piece of
   * work the per-event way (a record that is not an event, a request, a held key's work); the time until which a
   * batch that is not full lingers; or nothing (the first record waits for its retry, or the buffer is settled).
   * Records the filters pass over, and ones dead-lettered before, are settled here without a send.
   */
  private next(
    lane: Lane,
    ordering: Ordering,
    settings: BatchSettings,
    now: number,
    /** Batches out beside this one (a stream lane): their records are passed over, not waited for. */
    beside = false,
  ): Batch | Work | number | undefined {
    if (ordering === 'key') {
      for (const [key, held] of lane.held)
        if (!held.sending && held.queue[0].nextAttemptAt.getTime() <= now) return { kind: 'held', key, held };
    }
    const batch: Batch = { records: [], entries: [] };
    let bytes = 0;
    let full = false;
    for (const record of lane.buffer) {
      if (record.state === 'settled' || (beside && record.state === 'sending')) continue;
      if (record.state !== undefined || (record.retryAt ?? 0) > now) break;
      const frame = record.frame;
      if (frame && lane.deadLettered.delete(record.offset)) {
        this.ctx.progress.passedOverDeadLettered = (this.ctx.progress.passedOverDeadLettered ?? 0) + 1;
        record.state = 'settled';
        continue;
      }
      if (frame && !lane.filter.matches(frame)) {
        this.ctx.progress.filteredOut++;
        record.state = 'settled';
        continue;
      }
      const held = ordering === 'key' && frame !== undefined && lane.held.has(keyOf(record));
      // Not an event (dead-lettered as such), a request (at most once: never retried with a batch), or an event
      // whose key waits in the retry table: each alone, the per-event way.
      if (!frame || held || frame.extensions[CORRELATION_ATTRIBUTE] !== undefined) {
        if (batch.records.length > 0) break;
        return held ? { kind: 'park-behind', record, key: keyOf(record) } : { kind: 'send', record };
      }
      const entry = batchEntryOf(frame);
      const count = batch.records.length;
      if (count > 0 && batchBytesOf(bytes + entry.length, count + 1) > settings.maxBytes) {
        full = true;
        break;
      }
      batch.records.push(record);
      batch.entries.push(entry);
      bytes += entry.length;
      if (batch.records.length >= settings.maxEvents) {
        full = true;
        break;
      }
    }
    if (batch.records.length === 0) return undefined;
    const lingerUntil = (batch.records[0].timestamp ?? now) + settings.lingerMs;
    if (!full && lingerUntil > now) return lingerUntil;
    return batch;
  }

  /** A batch to the sink: all its events settled, retried in the lane as a batch, or split. */
  private async deliver(lane: Lane, batch: Batch, ordering: Ordering): Promise<Outcome> {
    const { records } = batch;
    if (records.length === 1) return this.runner.start(lane, { kind: 'send', record: records[0] });
    for (const r of records) r.state = 'sending';
    let result;
    try {
      result = await this.attempt(lane, batch, false);
    } finally {
      for (const r of records) if (r.state === 'sending') r.state = undefined;
    }
    if (!result) return 'halt';
    if (result.ok) return this.settle(batch);
    const head = records[0];
    const verdict = verdictOf(
      result,
      head.attempts ?? 0,
      retryPolicyOf(lane.subscription, this.ctx.deps.options),
      'lane',
    );
    // A 410 disables the subscription, as for an event.
    if (verdict.kind === 'gone' || verdict.kind === 'not-attempted' || verdict.kind === 'delivered')
      return this.failures.inLane(lane, head, head.frame!, result);
    this.ctx.progress.failedAttempts++;
    const firstFailedAt = head.firstFailedAt ?? new Date();
    for (const r of records) {
      r.attempts = verdict.attempts;
      r.firstFailedAt ??= firstFailedAt;
    }
    const where = {
      subscription: lane.subscription.id,
      topic: lane.topic,
      partition: lane.partition,
      offsets: `${head.offset}-${records[records.length - 1].offset}`,
      attempt: verdict.attempts,
      error: result.error,
    };
    if (verdict.kind === 'retry-in-lane') {
      for (const r of records) r.retryAt = Date.now() + verdict.delayMs;
      this.log.info({ ...where, retryInMs: Math.round(verdict.delayMs) }, 'batch delivery failed; retrying the batch');
      return 'retry';
    }
    this.log.info(where, 'batch delivery failed again; splitting it to find the event the sink refuses');
    return this.split(lane, batch, ordering);
  }

  /**
   * Each half of a failed batch at once, in order; a half that fails again is split in turn. The events of the
   * batch stay out of the lane's next batches until their half is sent (a stream lane starts other batches
   * meanwhile); those not sent when the split stops are the lane's again.
   */
  private async split(lane: Lane, batch: Batch, ordering: Ordering): Promise<Outcome> {
    for (const r of batch.records) r.state = 'sending';
    const mid = Math.ceil(batch.records.length / 2);
    for (const [from, to] of [
      [0, mid],
      [mid, batch.records.length],
    ]) {
      const part = { records: batch.records.slice(from, to), entries: batch.entries.slice(from, to) };
      const held = lane.held.size;
      const outcome = await this.isolate(lane, part, ordering);
      // `key`: an event just parked holds its key; the key's later events are parked behind it, which the lane
      // does as it goes on from its first unsettled record.
      const parkedKey = outcome === 'settled' && ordering === 'key' && lane.held.size > held;
      if (outcome !== 'settled' || parkedKey) {
        // The halves not attempted are the lane's again (the attempted one released its own).
        for (const r of batch.records.slice(to)) if (r.state === 'sending') r.state = undefined;
        return outcome;
      }
    }
    return 'settled';
  }

  /** Part of a split batch: one event the per-event way (its failure is its own), or a batch sent at once. */
  private async isolate(lane: Lane, part: Batch, ordering: Ordering): Promise<Outcome> {
    if (part.records.length === 1) return this.runner.start(lane, { kind: 'send', record: part.records[0] });
    for (const r of part.records) r.state = 'sending';
    let result;
    try {
      result = await this.attempt(lane, part, true);
    } finally {
      for (const r of part.records) if (r.state === 'sending') r.state = undefined;
    }
    if (!result) return 'halt';
    if (result.ok) return this.settle(part);
    // Gone, or not attempted (a stream client that left): as for a batch, not split further.
    if (result.gone || result.notAttempted)
      return this.failures.inLane(lane, part.records[0], part.records[0].frame!, result);
    return this.split(lane, part, ordering);
  }

  private attempt(lane: Lane, batch: Batch, splitting: boolean) {
    const first = batch.records[0];
    const last = batch.records[batch.records.length - 1];
    // One `webhook-id` per batch, the same on each attempt of the same events.
    const id = `${messageIdOf({ subscriptionId: lane.subscription.id, topic: lane.topic, partition: lane.partition, offset: first.offset })}-${last.offset}`;
    const out = { entries: batch.entries, frames: batch.records.map((r) => r.frame!) };
    return this.runner.attempt(lane, out, id, this.runner.sendSignalOf(lane), first.timestamp, splitting);
  }

  private settle(batch: Batch): Outcome {
    for (const r of batch.records) r.state = 'settled';
    this.ctx.progress.delivered += batch.records.length;
    return 'settled';
  }
}

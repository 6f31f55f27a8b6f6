import { setMaxListeners } from 'node:events';
import { frameFromAttributes, type EventFrame } from '@libs/frame';
import { createLogger } from '@libs/logging';
import type { WebhookResult } from './webhook-sender';
import type { DispatchContext } from './dispatch-context';
import { FailurePolicy, messageIdOf, NOT_ATTEMPTED_RETRY_MS } from './failure-policy';
import { HeldKey, holdKey, loadHeld, releaseHead } from './held-keys';
import { drainLane, type LaneOutcome } from './lane-drain';
import { Lane, LaneRecord, STREAM_LANE_DEPTH } from './lane';
import { depthOf, keyOf, orderingOf, startable, Work } from './ordering';
import { BatchLanes } from './batch-lanes';
import { batchSettingsOf, type OutBatch } from './webhook-batch';

/** Parked deliveries a recovering lane reads at once. */
const RECOVERY_BATCH = 64;

/** Most deliveries out at once in a webhook lane, whatever its subscription asks (each listens on the lane's signal). */
const MAX_LANE_DEPTH = 256;

/**
 * Runs the lanes: starts every idle lane that has records, and drains it, up to the lane's depth of deliveries
 * at once, in the order its subscription's ordering allows (ordering.ts); each answer goes to the
 * {@link FailurePolicy}. A lane's offset moves over the settled records at its front: it is always the lowest
 * offset the lane has not settled. Every attempt needs a permit of the subscription's circuit breaker (circuit-breaker.ts): while it is
 * open, the lane starts nothing. A lane marked `recovering` (its breaker opened) first delivers the parked
 * deliveries of its subscription partition, in offset order and back to back, then goes on with new events.
 */
export class LaneRunner {
  private readonly log = createLogger('DispatchLoop');
  /** The lanes of batched subscriptions (`config.batch`, webhook and stream) drain there. */
  private readonly batches: BatchLanes;

  constructor(
    private readonly ctx: DispatchContext,
    private readonly failures: FailurePolicy,
  ) {
    this.batches = new BatchLanes(ctx, failures, this);
  }

  /** Starts every idle lane that has records and no retry pending. */
  kick(): void {
    const now = Date.now();
    for (const lane of this.ctx.lanes.values()) {
      if (
        lane.busy ||
        (lane.buffer.length === 0 && !lane.recovering && lane.held.size === 0) ||
        lane.retryAt > now ||
        lane.abort.signal.aborted
      )
        continue;
      if (!this.ctx.breakers.of(lane.subscription.id).admitting) continue;
      lane.busy = true;
      void this.drain(lane)
        .catch((e: unknown) => this.laneFailed(lane, e))
        .finally(() => {
          lane.busy = false;
          this.ctx.wake();
        });
    }
  }

  /** The waits (ms from `now`) until a lane or a record of one may start again. */
  dueRetries(now: number): number[] {
    const due: number[] = [];
    for (const lane of this.ctx.lanes.values()) {
      if (lane.retryAt > now) due.push(lane.retryAt - now);
      const halfOpensAt = this.ctx.breakers.of(lane.subscription.id).halfOpensAt;
      if (halfOpensAt !== undefined && halfOpensAt > now) due.push(halfOpensAt - now);
      for (const r of lane.buffer) if (r.state === undefined && (r.retryAt ?? 0) > now) due.push(r.retryAt! - now);
      for (const h of lane.held.values())
        if (!h.sending && h.queue[0].nextAttemptAt.getTime() > now) due.push(h.queue[0].nextAttemptAt.getTime() - now);
    }
    return due;
  }

  /** True while some lane is mid-delivery. */
  busy(): boolean {
    return [...this.ctx.lanes.values()].some((l) => l.busy);
  }

  /** Aborted when the lane closes or the gate shuts; built once per lane and gate period, not per send. */
  sendSignalOf(lane: Lane): AbortSignal {
    const gate = this.ctx.gateSignal();
    if (!lane.send || lane.send.gate !== gate) {
      lane.send = { gate, signal: AbortSignal.any([lane.abort.signal, gate]) };
      // Every delivery out in the lane listens on it (a stream lane has up to STREAM_LANE_DEPTH).
      setMaxListeners(2 * Math.max(STREAM_LANE_DEPTH, MAX_LANE_DEPTH) + 10, lane.send.signal);
    }
    return lane.send.signal;
  }

  /**
   * A lane's own storage write failed (parking, dead-lettering). If the subscription is gone (its row was
   * deleted under us), the lane closes; otherwise it waits and tries the same event again. Nothing moved.
   */
  private laneFailed(lane: Lane, e: unknown): void {
    if (this.ctx.noteFenced(e)) return;
    if ((e as { driverError?: { code?: string }; code?: string }).driverError?.code === '23503') {
      this.ctx.lanes.close(lane);
      this.log.info(
        { subscription: lane.subscription.id, partition: lane.partition },
        'subscription deleted during delivery; lane closed',
      );
      return;
    }
    lane.retryAt = Date.now() + this.ctx.deps.options.retryMaxMs;
    this.log.error(
      {
        subscription: lane.subscription.id,
        topic: lane.topic,
        partition: lane.partition,
        offset: lane.nextOffset,
        error: (e as Error).message,
      },
      'could not record a failed delivery; trying the event again later',
    );
  }

  /**
   * Delivers a lane's buffer, up to the lane's depth at once, in the order its subscription's ordering allows
   * (ordering.ts), until nothing is left to start: the buffer is settled, its records wait for their retries (or
   * behind an earlier record of their key), or the lane halted (closed, gate shut, nobody to deliver to, the
   * subscription disabled). The offset moves over the settled records at the front.
   */
  private async drain(lane: Lane): Promise<void> {
    const ordering = orderingOf(lane.subscription);
    if (lane.recovering) {
      // Its parked backlog first: in a `key` lane, as held keys that go on beside the others; otherwise in offset
      // order before any new event.
      if (ordering === 'key') {
        await loadHeld(lane, this.ctx.deps.retries);
        lane.recovering = false;
      } else if (!(await this.recover(lane))) return;
    }
    const batch = batchSettingsOf(lane.subscription);
    if (batch) return this.batches.drain(lane, ordering, batch);
    const cap = lane.subscription.protocol === 'STREAM' ? STREAM_LANE_DEPTH : MAX_LANE_DEPTH;
    const depth = Math.min(cap, depthOf(lane, this.ctx.deps.options.concurrency));
    const { failure } = await drainLane(this.ctx, lane, depth, (room) => ({
      // Lazily: each piece is marked as started before the next is chosen.
      started: (function* (runner: LaneRunner) {
        for (const work of startable(lane, ordering, room, Date.now())) yield runner.start(lane, work);
      })(this),
    }));
    // A `partition` lane waits for its first record's retry; the others are started again each round and start
    // each waiting record when it is due.
    const head = lane.buffer.find((r) => r.state !== 'settled');
    lane.retryAt = ordering === 'partition' && head !== undefined && head.state === undefined ? (head.retryAt ?? 0) : 0;
    if (failure) throw failure.error;
  }

  /** Starts one piece of a lane's work; resolves with its outcome, the record's state set from it. */
  async start(lane: Lane, work: Work): Promise<LaneOutcome> {
    if (work.kind === 'held') return this.deliverHeld(lane, work.key, work.held);
    const { record } = work;
    record.state = 'sending';
    try {
      const outcome =
        work.kind === 'send' ? await this.deliver(lane, record) : await this.parkBehind(lane, record, work.key);
      // `key` ordering: a record parked now holds its key; the key's later events are parked behind it.
      if (outcome === 'settled' && record.parked && orderingOf(lane.subscription) === 'key')
        holdKey(lane, work.kind === 'send' ? keyOf(record) : work.key, record.parked);
      record.state = outcome === 'settled' ? 'settled' : undefined;
      return outcome;
    } catch (e) {
      record.state = undefined;
      throw e;
    }
  }

  /** `key` ordering: a record whose key is held goes to the retry table behind the key's parked deliveries. */
  private async parkBehind(lane: Lane, record: LaneRecord, key: string): Promise<LaneOutcome> {
    const frame = record.frame;
    // Not an event, or one its filters pass over: settled as in any lane (neither is delivered).
    if (!frame || !lane.filter.matches(frame) || lane.deadLettered.has(record.offset))
      return this.deliver(lane, record);
    const held = lane.held.get(key);
    return this.failures.parkBehind(lane, record, frame, held?.queue[held.queue.length - 1].offset ?? -1);
  }

  /**
   * `key` ordering: the first parked delivery of a held key, attempted by the lane (not the sweep) so the key keeps
   * its order; once it is delivered or dead-lettered, the key's next parked delivery is due at once.
   */
  private async deliverHeld(lane: Lane, key: string, held: HeldKey): Promise<LaneOutcome> {
    const parked = held.queue[0];
    held.sending = true;
    try {
      const frame = frameFromAttributes(parked.attributes, parked.data);
      const result = await this.attempt(lane, frame, messageIdOf(parked), this.sendSignalOf(lane));
      if (!result) return 'halt';
      const verdict = await this.failures.parked(parked, lane.subscription, frame, result);
      switch (verdict.kind) {
        case 'delivered':
          this.ctx.progress.recovered++;
          releaseHead(lane, key);
          return 'settled';
        case 'dead-letter':
          releaseHead(lane, key);
          return 'settled';
        case 'park':
          parked.attempts = verdict.attempts;
          parked.nextAttemptAt = new Date(Date.now() + verdict.delayMs);
          return 'retry';
        case 'not-attempted':
          parked.nextAttemptAt = new Date(Date.now() + NOT_ATTEMPTED_RETRY_MS);
          return 'retry';
        default:
          return 'halt';
      }
    } finally {
      held.sending = false;
    }
  }

  /**
   * One record of a lane to its sink: `settled` (acknowledged, passed over, parked or dead-lettered), `retry` (it
   * waits for its next attempt in the lane), or `halt`: the send was aborted, nobody was there to take it, or the
   * subscription was disabled, and the lane starts nothing more for now.
   */
  private async deliver(lane: Lane, record: LaneRecord): Promise<LaneOutcome> {
    if (lane.deadLettered.delete(record.offset)) {
      this.ctx.progress.passedOverDeadLettered = (this.ctx.progress.passedOverDeadLettered ?? 0) + 1;
      return 'settled';
    }
    const frame = record.frame;
    if (!frame) {
      await this.failures.unreadable(lane, record);
      return 'settled';
    }
    if (!lane.filter.matches(frame)) {
      this.ctx.progress.filteredOut++;
      return 'settled';
    }
    const messageId = messageIdOf({
      subscriptionId: lane.subscription.id,
      topic: lane.topic,
      partition: lane.partition,
      offset: record.offset,
    });
    // No outcome: the breaker is open (nothing went out), or the lane closed or the gate shut mid-send.
    const result = await this.attempt(lane, frame, messageId, this.sendSignalOf(lane), record.timestamp);
    if (!result) return 'halt';
    // The common answer without another await (the failure policy's verdict for a 2xx is `delivered`).
    if (result.ok) {
      this.ctx.progress.delivered++;
      return 'settled';
    }
    return this.failures.inLane(lane, record, frame, result);
  }

  /**
   * One attempt under a permit of the subscription's breaker, its answer reported to it: undefined when the
   * breaker gives no permit or the send was aborted (no outcome). `event` is one event, or a batch
   * (batch-lanes.ts). A failed part of a batch being split (`splitting`) is not reported: the sink answered, and
   * refused an event the split goes on to isolate, so one bad event does not open the breaker.
   */
  async attempt(
    lane: Lane,
    event: EventFrame | OutBatch,
    messageId: string,
    signal: AbortSignal,
    publishedAt?: number,
    splitting = false,
  ): Promise<WebhookResult | undefined> {
    const breaker = this.ctx.breakers.of(lane.subscription.id);
    const permit = breaker.acquire();
    if (!permit) return undefined;
    const { sender } = this.ctx.deps;
    let result: WebhookResult;
    try {
      result = await ('entries' in event
        ? sender.sendBatch!(lane.subscription, event, messageId, signal)
        : sender.send(lane.subscription, event, messageId, signal));
    } catch (e) {
      breaker.release(permit);
      throw e;
    }
    if (signal.aborted || (splitting && !result.ok && !result.gone)) {
      breaker.release(permit);
      return signal.aborted ? undefined : result;
    }
    this.failures.answered(lane.subscription, permit, result, publishedAt);
    return result;
  }

  /**
   * Ordered recovery: the lane's parked deliveries, in offset order, one after the other at the sink's pace
   * (not the sweep's), each answer to the failure policy like a swept one. True when none is left (the lane goes
   * on with new events); false when it must wait: the breaker gives no permit, the lane closed or the gate shut,
   * or a parked delivery failed again (the lane waits for its retry, so order holds).
   */
  private async recover(lane: Lane): Promise<boolean> {
    const { ctx } = this;
    const key = { subscriptionId: lane.subscription.id, topic: lane.topic, partition: lane.partition };
    let after = -1;
    for (;;) {
      const backlog = await ctx.deps.retries.backlogOf(key, RECOVERY_BATCH, after);
      if (backlog.length === 0) {
        lane.recovering = false;
        return true;
      }
      for (const parked of backlog) {
        if (lane.abort.signal.aborted || !ctx.gateOpen()) return false;
        const signal = this.sendSignalOf(lane);
        const frame = frameFromAttributes(parked.attributes, parked.data);
        const result = await this.attempt(lane, frame, messageIdOf(parked), signal);
        if (!result) return false;
        const verdict = await this.failures.parked(parked, lane.subscription, frame, result);
        if (verdict.kind === 'delivered') ctx.progress.recovered++;
        else if (verdict.kind === 'park') {
          lane.retryAt = Date.now() + verdict.delayMs;
          return false;
        } else if (verdict.kind === 'not-attempted') {
          lane.retryAt = Date.now() + NOT_ATTEMPTED_RETRY_MS;
          return false;
        } else if (verdict.kind !== 'dead-letter') return false;
        after = parked.offset;
      }
    }
  }
}

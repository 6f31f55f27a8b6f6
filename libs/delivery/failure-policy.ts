import { attributesOf, CORRELATION_ATTRIBUTE, EventFrame } from '@libs/frame';
import { createLogger } from '@libs/logging';
import { DEFAULT_SINK_FAILURE_SUMMARY_MS, SinkFailureLog } from './sink-failure-log';
import type { DeadLetter, ParkedDelivery, SubscriptionEntity } from '@libs/storage';
import { BreakerPermit, reportAnswer } from './circuit-breaker';
import type { DispatchContext, DispatchLoopOptions } from './dispatch-context';
import type { Lane, LaneRecord } from './lane';
import type { WebhookResult } from './webhook-sender';

/** Attempts made in the lane, in partition order, before a failing delivery is parked in the retry table. */
export const IN_LANE_ATTEMPTS = 3;
/** When nobody was there to deliver to (no stream client connected any more), how soon to look again. */
export const NOT_ATTEMPTED_RETRY_MS = 100;

export interface RetryPolicy {
  initialMs: number;
  maxMs: number;
  maxAttempts: number;
}

/** The subscription's `config.retry`, each value over the loop's default. */
export function retryPolicyOf(subscription: SubscriptionEntity, defaults: DispatchLoopOptions): RetryPolicy {
  const own = (subscription.config?.retry ?? {}) as Partial<{
    maxAttempts: number;
    initialDelayMs: number;
    maxDelayMs: number;
  }>;
  return {
    initialMs: own.initialDelayMs ?? defaults.retryInitialMs,
    maxMs: own.maxDelayMs ?? defaults.retryMaxMs,
    maxAttempts: own.maxAttempts ?? defaults.maxAttempts,
  };
}

/** The delay before attempt `attempts + 1`: exponential, capped, with jitter (uniform in [d/2, d]). */
export function backoff(policy: RetryPolicy, attempts: number): number {
  const ceiling = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(attempts - 1, 30));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** The id a delivery carries to its sink (`webhook-id`), the same across every attempt, in the lane or parked. */
export function messageIdOf(at: { subscriptionId: string; topic: string; partition: number; offset: number }): string {
  return `${at.subscriptionId}:${at.topic}:${at.partition}:${at.offset}`;
}

/**
 * What follows a sink's answer. `attempts` counts the failed attempts including this one (absent unless the
 * answer was a failure); `delayMs` is the wait before the next attempt, never shorter than Retry-After.
 */
export type Verdict =
  | { kind: 'delivered' }
  /** 410: the sink wants nothing more; the subscription is disabled. */
  | { kind: 'gone' }
  /** Nobody was there to try (a stream client left): no attempt counted. */
  | { kind: 'not-attempted' }
  | { kind: 'retry-in-lane'; attempts: number; delayMs: number }
  /** Into the retry table (from the lane), or rescheduled there (a parked delivery). */
  | { kind: 'park'; attempts: number; delayMs: number }
  /** The subscription's last attempt, or the receiver rejected the event for good. */
  | { kind: 'dead-letter'; attempts: number };

/**
 * The one failure decision, for a delivery in its lane and for a parked one alike. `failedBefore` is how many
 * attempts failed before this answer.
 */
export function verdictOf(
  result: WebhookResult,
  failedBefore: number,
  policy: RetryPolicy,
  from: 'lane' | 'parked',
): Verdict {
  if (result.ok) return { kind: 'delivered' };
  if (result.gone) return { kind: 'gone' };
  if (result.notAttempted) return { kind: 'not-attempted' };
  const attempts = failedBefore + 1;
  // A receiver's reject is a failure with no attempt left: the same path, straight to the dead-letter queue.
  if (result.rejected || attempts >= policy.maxAttempts) return { kind: 'dead-letter', attempts };
  const delayMs = Math.max(backoff(policy, attempts), result.retryAfterMs ?? 0);
  if (from === 'parked' || attempts >= IN_LANE_ATTEMPTS) return { kind: 'park', attempts, delayMs };
  return { kind: 'retry-in-lane', attempts, delayMs };
}

/** A dead letter for a subscription partition's offset: the event, or the raw bytes of a record that is none. */
export function deadLetterOf(
  at: { subscriptionId: string; topic: string; partition: number; offset: number },
  event: EventFrame | { raw: Buffer | null },
  attempts: number,
  lastError: string,
  firstFailedAt: Date,
): DeadLetter {
  const isFrame = !('raw' in event);
  return {
    subscriptionId: at.subscriptionId,
    topic: at.topic,
    partition: at.partition,
    offset: at.offset,
    eventId: isFrame ? event.id : '',
    attributes: isFrame ? attributesOf(event) : {},
    data: isFrame ? (event.data ?? null) : event.raw,
    attempts,
    lastError,
    firstFailedAt,
    lastFailedAt: new Date(),
  };
}

/**
 * Acts on the verdicts: retry in the lane (exponential backoff with jitter, or later if the sink asked with
 * Retry-After) for the first few attempts; then park the delivery in the retry table so the lane moves on; after
 * the subscription's last attempt (or a reject), dead-letter it; on 410, disable the subscription. Every write
 * runs through the loop's fence, and parking and dead-lettering are durable before the lane may move past the
 * event.
 */
export class FailurePolicy {
  private readonly log = createLogger('DispatchLoop');
  /** Failed attempts: a sink's first in full, then one summary line per period (sink-failure-log.ts). */
  readonly failures: SinkFailureLog;

  constructor(private readonly ctx: DispatchContext) {
    this.failures = new SinkFailureLog(
      this.log,
      ctx.deps.options.sinkFailureSummaryMs ?? DEFAULT_SINK_FAILURE_SUMMARY_MS,
    );
  }

  /**
   * Reports a sink's answer to the subscription's circuit breaker, and acts on what it changed: when the breaker
   * opens, every lane of the subscription will first deliver its parked backlog, in offset order, once the sink
   * is back (ordered recovery); when it closes, the lanes start again.
   */
  answered(subscription: SubscriptionEntity, permit: BreakerPermit, result: WebhookResult, publishedAt?: number): void {
    const { ctx } = this;
    ctx.deps.metrics?.attempted(subscription.protocol, result, publishedAt);
    const breaker = ctx.breakers.of(subscription.id);
    const transition = reportAnswer(breaker, permit, result);
    if (!transition) return;
    const at = { subscription: subscription.id, sink: subscription.sink, breaker: breaker.snapshot() };
    if (transition === 'CLOSED') {
      this.log.info(at, 'the sink answered the probe; circuit breaker closed, parked deliveries go first');
      ctx.wake();
      return;
    }
    ctx.progress.breakerOpenings++;
    ctx.deps.metrics?.breakerOpened();
    for (const lane of ctx.lanes.values()) if (lane.subscription.id === subscription.id) lane.recovering = true;
    this.log.warn(
      { ...at, error: result.error, halfOpensInMs: Math.max(0, (breaker.halfOpensAt ?? Date.now()) - Date.now()) },
      transition === 'OPENED'
        ? 'the sink keeps failing; circuit breaker open: its lanes stop fetching and sending until a probe succeeds'
        : 'the probe failed; circuit breaker open again, for longer',
    );
  }

  /**
   * A lane's record and its sink's answer: `settled` (acknowledged, parked or dead-lettered), `retry` (it waits
   * for its next attempt in the lane), or `halt`: nobody was there to take it, or the subscription was disabled,
   * and the lane starts nothing more for now.
   */
  async inLane(
    lane: Lane,
    record: LaneRecord,
    frame: EventFrame,
    result: WebhookResult,
  ): Promise<'settled' | 'retry' | 'halt'> {
    const { ctx } = this;
    const verdict = verdictOf(result, record.attempts ?? 0, retryPolicyOf(lane.subscription, ctx.deps.options), 'lane');
    const offset = record.offset;
    switch (verdict.kind) {
      case 'delivered':
        ctx.progress.delivered++;
        return 'settled';
      case 'gone':
        await this.gone(lane.subscription, offset);
        return 'halt';
      case 'not-attempted':
        record.retryAt = Date.now() + NOT_ATTEMPTED_RETRY_MS;
        return 'halt';
    }
    const error = result.error ?? 'failed';
    record.attempts = verdict.attempts;
    const firstFailedAt = (record.firstFailedAt ??= new Date());
    ctx.progress.failedAttempts++;
    const at = { subscriptionId: lane.subscription.id, topic: lane.topic, partition: lane.partition, offset };
    const where = {
      subscription: at.subscriptionId,
      topic: at.topic,
      partition: at.partition,
      offset,
      eventId: frame.id,
      requestId: frame.requestId,
      attempt: verdict.attempts,
      error,
    };
    // A request (POST /events/request: the event carries its correlationid) is an RPC whose side effects must not
    // repeat: delivered at most once to each subscription, the one exception to at-least-once. Its requester gets
    // 408 at its deadline.
    if (frame.extensions[CORRELATION_ATTRIBUTE] !== undefined) {
      this.failures.failed(
        lane.subscription.id,
        lane.subscription.sink,
        'requestDropped',
        where,
        "a request's delivery failed; not retried (requests are delivered at most once)",
      );
      return 'settled';
    }
    if (verdict.kind === 'dead-letter') {
      const letter = deadLetterOf(at, frame, verdict.attempts, error, firstFailedAt);
      await ctx.fence.run((m) => ctx.deps.deadLetters.add([letter], m));
      ctx.progress.deadLettered++;
      ctx.deps.metrics?.deadLettered();
      this.failures.failed(
        lane.subscription.id,
        lane.subscription.sink,
        'deadLettered',
        where,
        'delivery failed for the last time; moved to the dead-letter queue',
      );
      return 'settled';
    }
    if (verdict.kind === 'park') {
      const parked: ParkedDelivery = {
        ...at,
        attributes: attributesOf(frame),
        data: frame.data ?? null,
        attempts: verdict.attempts,
        lastError: error,
        firstFailedAt,
        nextAttemptAt: new Date(Date.now() + verdict.delayMs),
        epoch: ctx.fence.rowEpoch,
      };
      const written = await ctx.fence.run((m) => ctx.deps.retries.park(parked, m, ctx.deps.options.maxParked));
      if (written.rejected === 'SUBSCRIPTION_GONE') {
        ctx.lanes.closeSubscription(lane.subscription.id);
        this.log.info(where, 'subscription deleted during delivery; its lanes closed');
        return 'halt';
      }
      if (written.rejected === 'AT_CAP') {
        // The overflow policy: the event stays at the head of its lane (the offset waits, nothing is lost) and is
        // retried there, with the same backoff, after the parked deliveries of its partition, until it is
        // delivered, parked once there is room, or dead-lettered.
        ctx.progress.heldAtParkingCap++;
        record.retryAt = Date.now() + verdict.delayMs;
        // Its partition's parked deliveries go first (ordered recovery), so order holds when the sink is back.
        lane.recovering = true;
        this.failures.failed(
          lane.subscription.id,
          lane.subscription.sink,
          'held',
          { ...where, parked: written.parked, retryInMs: Math.round(verdict.delayMs) },
          'delivery failed and the subscription holds its cap of parked deliveries; held in the lane',
        );
        return 'retry';
      }
      ctx.progress.parked++;
      ctx.deps.metrics?.parked();
      record.parked = parked;
      this.failures.failed(
        lane.subscription.id,
        lane.subscription.sink,
        'parked',
        { ...where, retryInMs: Math.round(verdict.delayMs) },
        'delivery failed; parked for a later attempt',
      );
      return 'settled';
    }
    record.retryAt = Date.now() + verdict.delayMs;
    this.failures.failed(
      lane.subscription.id,
      lane.subscription.sink,
      'retrying',
      { ...where, retryInMs: Math.round(verdict.delayMs) },
      'delivery failed; retrying',
    );
    return 'retry';
  }

  /**
   * `key` ordering: a record whose key has a parked delivery is parked behind it without an attempt (the lane
   * delivers the key's parked deliveries in offset order, held-keys.ts): `settled` once it is in the retry table,
   * `retry` when the subscription holds its cap of parked deliveries (it waits in the lane, and the offset with it),
   * or `halt` when the subscription is gone.
   */
  async parkBehind(
    lane: Lane,
    record: LaneRecord,
    frame: EventFrame,
    aheadOffset: number,
  ): Promise<'settled' | 'retry' | 'halt'> {
    const { ctx } = this;
    const parked: ParkedDelivery = {
      subscriptionId: lane.subscription.id,
      topic: lane.topic,
      partition: lane.partition,
      offset: record.offset,
      attributes: attributesOf(frame),
      data: frame.data ?? null,
      attempts: 0,
      lastError: `held behind offset ${aheadOffset} of the same key`,
      firstFailedAt: new Date(),
      nextAttemptAt: new Date(),
      epoch: ctx.fence.rowEpoch,
    };
    const written = await ctx.fence.run((m) => ctx.deps.retries.park(parked, m, ctx.deps.options.maxParked));
    if (written.rejected === 'SUBSCRIPTION_GONE') {
      ctx.lanes.closeSubscription(lane.subscription.id);
      return 'halt';
    }
    if (written.rejected === 'AT_CAP') {
      ctx.progress.heldAtParkingCap++;
      record.retryAt = Date.now() + retryPolicyOf(lane.subscription, ctx.deps.options).initialMs;
      return 'retry';
    }
    ctx.progress.parkedBehind = (ctx.progress.parkedBehind ?? 0) + 1;
    record.parked = parked;
    return 'settled';
  }

  /**
   * A parked delivery and its sink's answer: delivered (the row goes), rescheduled, dead-lettered, or the
   * subscription disabled. Returns the verdict (ordered recovery waits out a rescheduled one's delay).
   */
  async parked(
    parked: ParkedDelivery,
    subscription: SubscriptionEntity,
    frame: EventFrame,
    result: WebhookResult,
  ): Promise<Verdict> {
    const { ctx } = this;
    const verdict = verdictOf(result, parked.attempts, retryPolicyOf(subscription, ctx.deps.options), 'parked');
    switch (verdict.kind) {
      case 'delivered':
        await ctx.fence.run((m) => ctx.deps.retries.delivered(parked, m));
        ctx.progress.delivered++;
        return verdict;
      case 'gone':
        await this.gone(subscription, parked.offset);
        return verdict;
      case 'not-attempted':
        return verdict;
    }
    const error = result.error ?? 'failed';
    ctx.progress.failedAttempts++;
    const where = {
      subscription: parked.subscriptionId,
      topic: parked.topic,
      partition: parked.partition,
      offset: parked.offset,
      eventId: frame.id,
      attempt: verdict.attempts,
      error,
    };
    if (verdict.kind === 'dead-letter') {
      const letter = deadLetterOf(parked, frame, verdict.attempts, error, parked.firstFailedAt);
      await ctx.fence.run((m) => ctx.deps.retries.deadLetter(letter, m));
      ctx.progress.deadLettered++;
      ctx.deps.metrics?.deadLettered();
      this.failures.failed(
        subscription.id,
        subscription.sink,
        'deadLettered',
        where,
        'parked delivery failed for the last time; moved to the dead-letter queue',
      );
      return verdict;
    }
    const next = new Date(Date.now() + verdict.delayMs);
    await ctx.fence.run((m) => ctx.deps.retries.reschedule(parked, verdict.attempts, next, error, m));
    this.failures.failed(
      subscription.id,
      subscription.sink,
      'parked',
      { ...where, retryInMs: Math.round(verdict.delayMs) },
      'parked delivery failed; rescheduled',
    );
    return verdict;
  }

  /** A record that is not a CloudEvent is kept in the dead-letter queue before the lane moves past it. */
  async unreadable(lane: Lane, record: LaneRecord): Promise<void> {
    const { ctx } = this;
    const at = {
      subscriptionId: lane.subscription.id,
      topic: lane.topic,
      partition: lane.partition,
      offset: record.offset,
    };
    const letter = deadLetterOf(at, { raw: record.value }, 0, `not a CloudEvent: ${record.error}`, new Date());
    await ctx.fence.run((m) => ctx.deps.deadLetters.add([letter], m));
    ctx.progress.deadLettered++;
    ctx.deps.metrics?.deadLettered();
    this.log.error(
      {
        subscription: lane.subscription.id,
        topic: lane.topic,
        partition: lane.partition,
        offset: record.offset,
        error: record.error,
      },
      'record is not a CloudEvent; moved to the dead-letter queue',
    );
  }

  /**
   * A sink that answered 410 wants nothing more: the subscription is disabled (through the fence: a stale run's
   * 410 changes nothing, and stops that run) and its lanes close.
   */
  private async gone(subscription: SubscriptionEntity, offset: number): Promise<void> {
    const reason = `the sink answered 410 Gone for offset ${offset}`;
    await this.ctx.fence.run((m) => this.ctx.deps.subscriptions.disable(subscription.id, reason, m));
    this.ctx.lanes.closeSubscription(subscription.id);
    this.log.warn({ subscription: subscription.id, sink: subscription.sink, reason }, 'subscription disabled');
  }
}

/**
 * The circuit breaker of one subscription's sink. While the sink fails, a loop without one would keep fetching,
 * attempting and parking every event (about 2 rows per second per partition); with one, it stops asking.
 *
 * - `CLOSED`: deliveries go out. `failureThreshold` failed attempts in a row (any lane or parked retry of the
 *   subscription; a success in between starts the count again) open it.
 * - `OPEN`: nothing goes out; the subscription's lanes neither fetch nor start deliveries, and its parked
 *   deliveries are not swept. After the open period it is half-open.
 * - `HALF_OPEN`: one delivery, the probe, goes out. Its success closes the breaker (the subscription's parked
 *   backlog then drains first: docs/delivery.md); its failure opens it again for twice as long as the last time,
 *   up to `maxOpenMs` (at least a `Retry-After` the sink asked for, within the same cap).
 *
 * Pure and clock-injected: a caller asks for a permit before each attempt and reports the attempt's outcome with
 * it. An outcome of a permit given before the breaker last changed state (an attempt that was already out when
 * it opened) changes nothing, so one slow answer cannot close a breaker that opened since, or count twice.
 */
import type { WebhookResult } from './webhook-sender';

export type BreakerState = 'CLOSED' | 'OPEN' | 'HALF_OPEN';

export interface CircuitBreakerOptions {
  /** Failed attempts in a row that open the breaker. */
  failureThreshold: number;
  /** The first open period. */
  openMs: number;
  /** The longest open period. */
  maxOpenMs: number;
}

/** Leave to attempt one delivery; report its outcome with it (or release it, when the attempt had none). */
export interface BreakerPermit {
  readonly probe: boolean;
  readonly generation: number;
}

/** A change of state an outcome caused, for the caller to log and act on. */
export type BreakerTransition = 'OPENED' | 'REOPENED' | 'CLOSED';

export interface BreakerSnapshot {
  state: BreakerState;
  consecutiveFailures: number;
  /** Times the breaker opened (from closed or after a failed probe). */
  openings: number;
  /** When an open breaker lets its next probe out (epoch ms). */
  halfOpensAt?: number;
  /** When the breaker last opened from closed (epoch ms): how long the sink has been failing. */
  openedAt?: number;
}

export class CircuitBreaker {
  private current: 'CLOSED' | 'OPEN' = 'CLOSED';
  private generation = 0;
  private failures = 0;
  /** Failed probes since the breaker last opened from closed: each doubles the open period. */
  private reopenings = 0;
  private openUntil = 0;
  private openedAt?: number;
  private probeOut = false;
  private openings = 0;

  constructor(
    private readonly options: CircuitBreakerOptions,
    private readonly now: () => number = Date.now,
  ) {
    if (options.failureThreshold < 1) throw new Error('a breaker opens after at least one failure');
    if (options.maxOpenMs < options.openMs) throw new Error("a breaker's longest open period is at least its first");
  }

  get state(): BreakerState {
    if (this.current === 'CLOSED') return 'CLOSED';
    return this.now() >= this.openUntil ? 'HALF_OPEN' : 'OPEN';
  }

  /** Whether {@link acquire} would give a permit now (without taking it): closed, or half-open with no probe out. */
  get admitting(): boolean {
    const state = this.state;
    return state === 'CLOSED' || (state === 'HALF_OPEN' && !this.probeOut);
  }

  /** When an open breaker next lets a probe out (epoch ms); undefined when it is not open. */
  get halfOpensAt(): number | undefined {
    return this.state === 'OPEN' ? this.openUntil : undefined;
  }

  /** A permit for one attempt: any while closed, the one probe while half-open, none while open. */
  acquire(): BreakerPermit | undefined {
    const state = this.state;
    if (state === 'CLOSED') return { probe: false, generation: this.generation };
    if (state === 'OPEN' || this.probeOut) return undefined;
    this.probeOut = true;
    return { probe: true, generation: this.generation };
  }

  /** The sink acknowledged the attempt. */
  succeeded(permit: BreakerPermit): BreakerTransition | undefined {
    if (permit.generation !== this.generation) return undefined;
    if (permit.probe) {
      this.probeOut = false;
      this.close();
      return 'CLOSED';
    }
    this.failures = 0;
    return undefined;
  }

  /** The attempt failed (an error, a timeout, a non-2xx answer); `retryAfterMs` is what the sink asked for. */
  failed(permit: BreakerPermit, retryAfterMs?: number): BreakerTransition | undefined {
    if (permit.generation !== this.generation) return undefined;
    if (permit.probe) {
      this.probeOut = false;
      this.reopenings++;
      this.open(retryAfterMs);
      return 'REOPENED';
    }
    this.failures++;
    if (this.failures < this.options.failureThreshold) return undefined;
    this.reopenings = 0;
    this.openedAt = this.now();
    this.open(retryAfterMs);
    return 'OPENED';
  }

  /** The attempt has no outcome (it was aborted, or nobody was there to take it): a probe may go out again. */
  release(permit: BreakerPermit): void {
    if (permit.probe && permit.generation === this.generation) this.probeOut = false;
  }

  snapshot(): BreakerSnapshot {
    return {
      state: this.state,
      consecutiveFailures: this.failures,
      openings: this.openings,
      halfOpensAt: this.halfOpensAt,
      openedAt: this.current === 'OPEN' ? this.openedAt : undefined,
    };
  }

  private open(retryAfterMs = 0): void {
    const { openMs, maxOpenMs } = this.options;
    const period = Math.min(maxOpenMs, Math.max(openMs * 2 ** Math.min(this.reopenings, 30), retryAfterMs));
    this.current = 'OPEN';
    this.openUntil = this.now() + period;
    this.generation++;
    this.openings++;
  }

  private close(): void {
    this.current = 'CLOSED';
    this.failures = 0;
    this.reopenings = 0;
    this.openedAt = undefined;
    this.generation++;
  }
}

/**
 * A sink's answer to an attempt made under `permit`, reported to its breaker. Any answer from the receiver (2xx,
 * or a reject: it is there and decided) is a success; an error, a timeout or another status is a failure; an
 * attempt nobody took (no stream client) or a 410 (the subscription is disabled) has no outcome.
 */
export function reportAnswer(
  breaker: CircuitBreaker,
  permit: BreakerPermit,
  result: WebhookResult,
): BreakerTransition | undefined {
  if (result.notAttempted || result.gone) {
    breaker.release(permit);
    return undefined;
  }
  if (result.ok || result.rejected) return breaker.succeeded(permit);
  return breaker.failed(permit, result.retryAfterMs);
}

/** The breakers of a loop's subscriptions, one per subscription (its sink), made on first use. */
export class CircuitBreakers {
  private readonly bySubscription = new Map<string, CircuitBreaker>();

  /** `options` absent: breakers that never open (every attempt goes out). */
  constructor(
    private readonly options: CircuitBreakerOptions = { failureThreshold: Infinity, openMs: 0, maxOpenMs: 0 },
    private readonly now: () => number = Date.now,
  ) {}

  of(subscriptionId: string): CircuitBreaker {
    let breaker = this.bySubscription.get(subscriptionId);
    if (!breaker) this.bySubscription.set(subscriptionId, (breaker = new CircuitBreaker(this.options, this.now)));
    return breaker;
  }

  /** A subscription this loop no longer dispatches. */
  forget(subscriptionId: string): void {
    this.bySubscription.delete(subscriptionId);
  }

  /** A subscription's breaker state; CLOSED when it has none yet (nothing failed). */
  stateOf(subscriptionId: string): BreakerState {
    return this.bySubscription.get(subscriptionId)?.state ?? 'CLOSED';
  }

  /** The subscriptions whose breaker is not closed, with where each stands. */
  notClosed(): { subscriptionId: string; breaker: BreakerSnapshot }[] {
    return [...this.bySubscription]
      .map(([subscriptionId, b]) => ({ subscriptionId, breaker: b.snapshot() }))
      .filter((e) => e.breaker.state !== 'CLOSED');
  }
}

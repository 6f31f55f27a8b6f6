import { BreakerPermit, CircuitBreaker, CircuitBreakers } from './circuit-breaker';

describe('CircuitBreaker', () => {
  let clock: number;
  const now = () => clock;
  const options = { failureThreshold: 3, openMs: 1000, maxOpenMs: 5000 };
  beforeEach(() => (clock = 1_000_000));

  /** A failed attempt under a fresh permit. */
  const fail = (b: CircuitBreaker, retryAfterMs?: number) => b.failed(b.acquire()!, retryAfterMs);
  const succeed = (b: CircuitBreaker) => b.succeeded(b.acquire()!);

  it('stays closed below the threshold, and a success starts the count again', () => {
    const b = new CircuitBreaker(options, now);
    expect(fail(b)).toBeUndefined();
    expect(fail(b)).toBeUndefined();
    expect(succeed(b)).toBeUndefined();
    expect(fail(b)).toBeUndefined();
    expect(fail(b)).toBeUndefined();
    expect(b.state).toBe('CLOSED');
    expect(b.snapshot()).toMatchObject({ consecutiveFailures: 2, openings: 0 });
  });

  it('opens after the threshold of failures in a row and gives no permit while open', () => {
    const b = new CircuitBreaker(options, now);
    fail(b);
    fail(b);
    expect(fail(b)).toBe('OPENED');
    expect(b.state).toBe('OPEN');
    expect(b.admitting).toBe(false);
    expect(b.acquire()).toBeUndefined();
    expect(b.halfOpensAt).toBe(clock + 1000);
    expect(b.snapshot()).toMatchObject({ state: 'OPEN', openings: 1, openedAt: clock });
    clock += 999;
    expect(b.acquire()).toBeUndefined();
  });

  it('lets exactly one probe out when half-open; its success closes the breaker', () => {
    const b = new CircuitBreaker(options, now);
    for (let i = 0; i < 3; i++) fail(b);
    clock += 1000;
    expect(b.state).toBe('HALF_OPEN');
    expect(b.admitting).toBe(true);
    const probe = b.acquire()!;
    expect(probe.probe).toBe(true);
    expect(b.admitting).toBe(false);
    expect(b.acquire()).toBeUndefined();
    expect(b.succeeded(probe)).toBe('CLOSED');
    expect(b.state).toBe('CLOSED');
    expect(b.acquire()).toMatchObject({ probe: false });
    expect(b.snapshot()).toMatchObject({ consecutiveFailures: 0, openedAt: undefined });
  });

  it('re-opens after a failed probe, each time twice as long, up to the cap; a success resets the period', () => {
    const b = new CircuitBreaker(options, now);
    for (let i = 0; i < 3; i++) fail(b);
    const periods: number[] = [];
    for (let i = 0; i < 5; i++) {
      clock = b.halfOpensAt!;
      expect(b.failed(b.acquire()!)).toBe('REOPENED');
      periods.push(b.halfOpensAt! - clock);
    }
    expect(periods).toEqual([2000, 4000, 5000, 5000, 5000]);
    clock = b.halfOpensAt!;
    expect(succeed(b)).toBe('CLOSED');
    for (let i = 0; i < 3; i++) fail(b);
    expect(b.halfOpensAt! - clock).toBe(1000);
  });

  it('stays open at least as long as the sink asked with Retry-After, within the cap', () => {
    const b = new CircuitBreaker(options, now);
    fail(b);
    fail(b);
    fail(b, 3000);
    expect(b.halfOpensAt! - clock).toBe(3000);
    clock = b.halfOpensAt!;
    b.failed(b.acquire()!, 60_000);
    expect(b.halfOpensAt! - clock).toBe(5000);
  });

  it('ignores outcomes of permits given before it last changed state', () => {
    const b = new CircuitBreaker(options, now);
    const early: BreakerPermit[] = [b.acquire()!, b.acquire()!, b.acquire()!, b.acquire()!];
    for (const p of early.slice(0, 3)) b.failed(p);
    expect(b.state).toBe('OPEN');
    // An attempt that was out when the breaker opened answers late: it neither closes nor extends it.
    expect(b.succeeded(early[3])).toBeUndefined();
    expect(b.state).toBe('OPEN');
    clock += 1000;
    const probe = b.acquire()!;
    expect(b.failed(early[3])).toBeUndefined();
    expect(b.state).toBe('HALF_OPEN');
    expect(b.succeeded(probe)).toBe('CLOSED');
    // The probe's permit is spent: reporting it again changes nothing.
    expect(b.failed(probe)).toBeUndefined();
    expect(b.snapshot().consecutiveFailures).toBe(0);
  });

  it('lets another probe out when the probe had no outcome (aborted, nobody there)', () => {
    const b = new CircuitBreaker(options, now);
    for (let i = 0; i < 3; i++) fail(b);
    clock += 1000;
    const probe = b.acquire()!;
    expect(b.acquire()).toBeUndefined();
    b.release(probe);
    expect(b.acquire()).toMatchObject({ probe: true });
  });

  it('refuses options that make no sense', () => {
    expect(() => new CircuitBreaker({ ...options, failureThreshold: 0 }, now)).toThrow();
    expect(() => new CircuitBreaker({ ...options, maxOpenMs: 10 }, now)).toThrow();
  });
});

describe('CircuitBreakers', () => {
  it('keeps one breaker per subscription and lists those not closed', () => {
    let clock = 0;
    const breakers = new CircuitBreakers({ failureThreshold: 1, openMs: 100, maxOpenMs: 100 }, () => clock);
    expect(breakers.of('a')).toBe(breakers.of('a'));
    breakers.of('b');
    breakers.of('a').failed(breakers.of('a').acquire()!);
    expect(breakers.notClosed().map((e) => [e.subscriptionId, e.breaker.state])).toEqual([['a', 'OPEN']]);
    clock = 100;
    expect(breakers.notClosed().map((e) => [e.subscriptionId, e.breaker.state])).toEqual([['a', 'HALF_OPEN']]);
    breakers.forget('a');
    expect(breakers.notClosed()).toEqual([]);
  });
});

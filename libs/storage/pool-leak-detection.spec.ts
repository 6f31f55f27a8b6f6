import type { PoolClient } from 'pg';
import type { Logger } from '@libs/logging';
import { PoolLeakDetector } from './pool-leak-detection';

/** The detector's bookkeeping on a fake clock (the real pool's side: test/integration/postgres-connection.spec.ts). */
describe('PoolLeakDetector', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function detector(thresholdMs = 1000) {
    const warn = jest.fn();
    const info = jest.fn();
    const d = new PoolLeakDetector(thresholdMs, 'spec-pool', { warn, info } as unknown as Logger);
    return { d, warn, info };
  }
  const client = (activeText?: string) =>
    ({ _getActiveQuery: () => (activeText ? { text: activeText } : null) }) as unknown as PoolClient;
  const counts = () => ({ poolTotal: 3, poolIdle: 0, poolWaiting: 2 });

  function takeConnectionForALongTime(d: PoolLeakDetector) {
    return d.acquirer(takeConnectionForALongTime);
  }

  it("reports a checkout held past the threshold once, with the acquirer's stack and the pool's counts, and counts it", () => {
    const { d, warn, info } = detector();
    const c = client('SELECT 1');
    d.checkedOut(
      c,
      (function theAcquirer() {
        return takeConnectionForALongTime(d);
      })(),
      counts,
    );
    jest.advanceTimersByTime(999);
    expect(warn).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(warn).toHaveBeenCalledTimes(1);
    const [fields] = warn.mock.calls[0] as [Record<string, unknown>];
    expect(fields).toMatchObject({
      pool: 'spec-pool',
      heldMs: 1000,
      thresholdMs: 1000,
      statementInFlight: 'SELECT 1',
      poolTotal: 3,
      poolWaiting: 2,
    });
    // The frame that called `acquirer` is left out; its caller is the first frame.
    expect((fields.acquiredBy as string[])[0]).toMatch(/theAcquirer/);
    expect(d.stats()).toEqual({ checkedOut: 1, leaks: 1 });
    jest.advanceTimersByTime(10_000);
    expect(warn).toHaveBeenCalledTimes(1);
    d.returned(c);
    expect(info).toHaveBeenCalledWith(
      expect.objectContaining({ heldMs: 11_000 }),
      expect.stringMatching(/went back to the pool/),
    );
    expect(d.stats()).toEqual({ checkedOut: 0, leaks: 1 });
  });

  it("reports only once the threshold has passed by the monotonic clock, when the timer fires early by the event loop's", () => {
    const { d, warn } = detector();
    // The checkout reads the clock 3 ms after the event loop did (its timers count from the loop's reading).
    const clock = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementationOnce(() => clock() + 3);
    d.checkedOut(client(), takeConnectionForALongTime(d), counts);
    jest.advanceTimersByTime(1000);
    expect(warn).not.toHaveBeenCalled();
    jest.advanceTimersByTime(3);
    expect(warn).toHaveBeenCalledWith(expect.objectContaining({ heldMs: 1000, thresholdMs: 1000 }), expect.any(String));
  });

  it('reports nothing for a checkout returned within the threshold, and forgets it', () => {
    const { d, warn, info } = detector();
    const c = client();
    d.checkedOut(c, d.acquirer(detector), counts);
    jest.advanceTimersByTime(500);
    d.returned(c);
    jest.advanceTimersByTime(5000);
    expect(warn).not.toHaveBeenCalled();
    expect(info).not.toHaveBeenCalled();
    expect(d.stats()).toEqual({ checkedOut: 0, leaks: 0 });
  });

  it('says when no statement is in flight (the holder awaits something else), and each checkout is timed from its own start', () => {
    const { d, warn } = detector();
    const c = client();
    d.checkedOut(c, d.acquirer(detector), counts);
    jest.advanceTimersByTime(600);
    d.returned(c);
    d.checkedOut(c, d.acquirer(detector), counts);
    jest.advanceTimersByTime(600);
    expect(warn).not.toHaveBeenCalled();
    jest.advanceTimersByTime(400);
    expect(warn).toHaveBeenCalledWith(
      expect.objectContaining({ statementInFlight: null, heldMs: 1000 }),
      expect.any(String),
    );
  });

  it('forgets every checkout when its pool ends', () => {
    const { d, warn } = detector();
    d.checkedOut(client(), d.acquirer(detector), counts);
    d.clear();
    jest.advanceTimersByTime(5000);
    expect(warn).not.toHaveBeenCalled();
    expect(d.stats()).toEqual({ checkedOut: 0, leaks: 0 });
  });
});

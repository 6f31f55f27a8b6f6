import { backoff, IN_LANE_ATTEMPTS, messageIdOf, verdictOf } from './failure-policy';

const policy = { initialMs: 100, maxMs: 1000, maxAttempts: 5 };

describe('the failure policy: one decision for a delivery in its lane and a parked one', () => {
  it.each([
    ['an acknowledgement', { ok: true }, 0, 'lane', 'delivered'],
    ['a 410', { ok: false, gone: true }, 0, 'lane', 'gone'],
    ['a 410 to a parked delivery', { ok: false, gone: true }, 3, 'parked', 'gone'],
    ['nobody to try', { ok: false, notAttempted: true }, 4, 'lane', 'not-attempted'],
    ['a first failure', { ok: false }, 0, 'lane', 'retry-in-lane'],
    ['the last in-lane failure', { ok: false }, IN_LANE_ATTEMPTS - 1, 'lane', 'park'],
    ['a failed parked attempt', { ok: false }, 3, 'parked', 'park'],
    ['the last attempt in the lane', { ok: false }, 4, 'lane', 'dead-letter'],
    ['the last attempt of a parked delivery', { ok: false }, 4, 'parked', 'dead-letter'],
    ['a reject in the lane', { ok: false, rejected: true }, 0, 'lane', 'dead-letter'],
    ['a reject of a parked delivery', { ok: false, rejected: true }, 3, 'parked', 'dead-letter'],
  ] as const)('%s: %s', (_what, result, failedBefore, from, kind) => {
    expect(verdictOf(result, failedBefore, policy, from).kind).toBe(kind);
  });

  it('counts the failed attempt in the verdict', () => {
    expect(verdictOf({ ok: false }, 1, policy, 'lane')).toMatchObject({ kind: 'retry-in-lane', attempts: 2 });
    expect(verdictOf({ ok: false }, 4, policy, 'parked')).toMatchObject({ kind: 'dead-letter', attempts: 5 });
  });

  it('never waits less than Retry-After, in the lane or parked', () => {
    expect(verdictOf({ ok: false, retryAfterMs: 30_000 }, 0, policy, 'lane')).toMatchObject({ delayMs: 30_000 });
    expect(verdictOf({ ok: false, retryAfterMs: 30_000 }, 3, policy, 'parked')).toMatchObject({ delayMs: 30_000 });
  });

  it('backs off exponentially up to the ceiling, with jitter in [d/2, d]', () => {
    for (let i = 0; i < 200; i++) {
      const first = backoff(policy, 1);
      expect(first).toBeGreaterThanOrEqual(50);
      expect(first).toBeLessThanOrEqual(100);
      const capped = backoff(policy, 20);
      expect(capped).toBeGreaterThanOrEqual(500);
      expect(capped).toBeLessThanOrEqual(1000);
    }
  });

  it('names a delivery the same wherever it is attempted', () => {
    expect(messageIdOf({ subscriptionId: 's', topic: 't', partition: 2, offset: 7 })).toBe('s:t:2:7');
  });
});

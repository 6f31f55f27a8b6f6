import { HttpClient } from './http';
import { fakeFetch } from './testing/fake-fetch';
import { backoffDelay, RETRY_DEFAULTS, retryAfterMs } from './retry';

describe('backoff', () => {
  const options = { ...RETRY_DEFAULTS, initialDelayMs: 100, maxDelayMs: 1000 };

  it.each([
    [1, 0.5, 50],
    [2, 0.999, 199],
    [3, 1, 400],
    [8, 1, 1000],
    [3, 0, 0],
  ])('retry %i with random %d waits %i ms (full jitter under a doubling cap)', (retry, random, expected) => {
    expect(backoffDelay(retry, options, 0, () => random)).toBe(expected);
  });

  it("never waits less than the server's Retry-After, even past maxDelayMs", () => {
    expect(backoffDelay(1, options, 3000, () => 0.5)).toBe(3000);
  });

  it.each([
    ['2', 2000],
    [' 0 ', 0],
    [null, 0],
    ['soon', 0],
    [new Date(10_000 + 5000).toUTCString(), 5000],
  ])('reads Retry-After %p as %i ms', (value, expected) => {
    expect(retryAfterMs(value, 10_000)).toBe(expected);
  });
});

describe('HttpClient retries', () => {
  it('an abort during the backoff ends the wait at once (a long Retry-After is not slept out)', async () => {
    const { fetch, sent } = fakeFetch(() => ({
      status: 503,
      body: { code: 'OVERLOADED' },
      headers: { 'retry-after': '30' },
    }));
    const http = new HttpClient({ url: 'http://mesh', fetch });
    const aborter = new AbortController();
    setTimeout(() => aborter.abort(), 20);
    const started = Date.now();
    await expect(http.send({ method: 'GET', path: '/x', idempotent: true, signal: aborter.signal })).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(1000);
    expect(sent).toHaveLength(1);
  }, 3000);
});

/** Bounded retries with exponential backoff and full jitter (a random delay in [0, cap]), so many clients refused together do not come back together. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 5). 1 turns retries off. */
  maxAttempts?: number;
  /** The cap of the first retry's delay (default 100 ms); it doubles each retry. */
  initialDelayMs?: number;
  /** The largest delay (default 5000 ms); a `Retry-After` longer than this is still honoured, up to `maxRetryAfterMs`. */
  maxDelayMs?: number;
  /**
   * The longest `Retry-After` waited for (default 60 000 ms): an answer asking for a longer wait is not retried, its
   * error is thrown at once (a server's header must not park a publish for an hour).
   */
  maxRetryAfterMs?: number;
  /**
   * How long one attempt of a publish or `request` (its reply wait added) waits for the whole answer (default 30 000
   * ms); then it is a `ConnectionError` `TIMEOUT`, retried like a connection reset (with the same event ids).
   */
  attemptTimeoutMs?: number;
}

export const RETRY_DEFAULTS: Required<RetryOptions> = {
  maxAttempts: 5,
  initialDelayMs: 100,
  maxDelayMs: 5000,
  maxRetryAfterMs: 60_000,
  attemptTimeoutMs: 30_000,
};

/**
 * `defaults` with the options given over them, an option given as `undefined` keeping its default; each checked with
 * `check` (a RangeError naming `${prefix}.${name}` when it fails).
 */
export function optionsOf<T extends object>(
  prefix: string,
  defaults: Required<T>,
  given: T | undefined,
  check: Record<keyof T, (v: number) => boolean>,
): Required<T> {
  const merged = { ...defaults };
  for (const [name, value] of Object.entries(given ?? {}))
    if (value !== undefined) (merged as Record<string, unknown>)[name] = value;
  for (const [name, valid] of Object.entries(check) as [string, (v: number) => boolean][]) {
    const value = (merged as Record<string, unknown>)[name];
    if (typeof value !== 'number' || !valid(value))
      throw new RangeError(`${prefix}.${name} is not valid: ${String(value)}`);
  }
  return merged;
}

export const positiveInteger = (v: number): boolean => Number.isSafeInteger(v) && v >= 1;
export const positive = (v: number): boolean => Number.isFinite(v) && v > 0;
export const notNegative = (v: number): boolean => Number.isFinite(v) && v >= 0;

/** The retry options given, over the defaults, checked (a RangeError naming the bad one). */
export function retryOptionsOf(given: RetryOptions | undefined): Required<RetryOptions> {
  return optionsOf('retry', RETRY_DEFAULTS, given, {
    maxAttempts: positiveInteger,
    initialDelayMs: notNegative,
    maxDelayMs: notNegative,
    maxRetryAfterMs: notNegative,
    // setTimeout's largest delay: a longer one fires at once.
    attemptTimeoutMs: (v) => positive(v) && v <= 2 ** 31 - 1,
  });
}

/** The delay before retry number `retry` (1 for the first), jittered; never below the server's `Retry-After`. */
export function backoffDelay(
  retry: number,
  options: Pick<Required<RetryOptions>, 'initialDelayMs' | 'maxDelayMs'>,
  retryAfterMs = 0,
  random = Math.random,
): number {
  const cap = Math.min(options.maxDelayMs, options.initialDelayMs * 2 ** (retry - 1));
  return Math.max(retryAfterMs, Math.floor(random() * cap));
}

/** `Retry-After` in milliseconds: delta-seconds or an HTTP date; 0 when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number {
  if (!value) return 0;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? 0 : Math.max(0, at - now);
}

/** Resolves after `ms`, or at once when `signal` aborts (its timer then cleared). */
export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });

/** Bounded retries with exponential backoff and full jitter (a random delay in [0, cap]), so many clients refused together do not come back together. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 5). 1 turns retries off. */
  maxAttempts?: number;
  /** The cap of the first retry's delay (default 100 ms); it doubles each retry. */
  initialDelayMs?: number;
  /** The largest delay (default 5000 ms); a `Retry-After` longer than this is still honoured. */
  maxDelayMs?: number;
}

export const RETRY_DEFAULTS: Required<RetryOptions> = { maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 5000 };

/** The delay before retry number `retry` (1 for the first), jittered; never below the server's `Retry-After`. */
export function backoffDelay(
  retry: number,
  options: Required<RetryOptions>,
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

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

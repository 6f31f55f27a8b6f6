/** What a take from a bucket found. */
export type BucketTake =
  { taken: true; remaining: number } | { taken: false; remaining: number; retryAfterSeconds: number };

/**
 * A token bucket: it refills at `rate` tokens a second up to `capacity` (the burst), and a take of n tokens
 * succeeds when the bucket holds min(n, capacity) of them. A take larger than the whole bucket is admitted when the
 * bucket is full and leaves it in debt, repaid by the refill before the next take: the quota filter lets that
 * happen only for a batch within the tenant's runtime-wide burst that is larger than this instance's share of it
 * (a batch above the whole burst is refused before it gets here), so the long-run rate still holds. Time is passed in (milliseconds),
 * so the arithmetic is a pure function of the calls.
 */
export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    private rate: number,
    private capacity: number,
    now: number,
    /** Tokens at the start: a full bucket unless said otherwise. */
    tokens = capacity,
  ) {
    this.tokens = tokens;
    this.at = now;
  }

  /** Takes n tokens, or says how long until it could (whole seconds, at least 1). */
  take(n: number, now: number): BucketTake {
    this.refill(now);
    const needed = Math.min(n, this.capacity);
    if (this.tokens >= needed) {
      this.tokens -= n;
      return { taken: true, remaining: Math.max(0, Math.floor(this.tokens)) };
    }
    return {
      taken: false,
      remaining: Math.max(0, Math.floor(this.tokens)),
      retryAfterSeconds: this.secondsUntil(needed),
    };
  }

  /** Whether n tokens could be taken now, without taking them (a publish needs both its buckets). */
  has(n: number, now: number): boolean {
    this.refill(now);
    return this.tokens >= Math.min(n, this.capacity);
  }

  /** Whole seconds (at least 1) until the bucket holds min(n, capacity) tokens. */
  secondsUntil(n: number): number {
    const missing = Math.min(n, this.capacity) - this.tokens;
    if (missing <= 0) return 1;
    if (this.rate <= 0) return 1;
    return Math.max(1, Math.ceil(missing / this.rate));
  }

  /**
   * Changes the rate and the capacity (this instance's share of the runtime-wide bucket moved, or the tenant's
   * quota changed): tokens earned so far are kept, up to the new capacity.
   */
  reshape(rate: number, capacity: number, now: number): void {
    this.refill(now);
    this.rate = rate;
    this.capacity = capacity;
    this.tokens = Math.min(this.tokens, capacity);
  }

  /**
   * Gives back n tokens taken for a request that was refused after all (invalid, or shed before anything was
   * written): a refused request costs nothing. Never above the capacity.
   */
  give(n: number, now: number): void {
    this.refill(now);
    this.tokens = Math.min(this.capacity, this.tokens + n);
  }

  level(now: number): number {
    this.refill(now);
    return this.tokens;
  }

  private refill(now: number): void {
    const elapsed = Math.max(0, now - this.at) / 1000;
    this.tokens = Math.min(this.capacity, this.tokens + elapsed * this.rate);
    this.at = Math.max(this.at, now);
  }
}

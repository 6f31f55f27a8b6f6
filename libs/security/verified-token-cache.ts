interface Entry<T> {
  value: T;
  /** Epoch ms after which the entry is not used (the token's `exp`). */
  expiresAt: number;
  /** When it was last put at the end of the order (a count of such moves). */
  touched: number;
}

/**
 * Verified tokens, remembered until they expire so a repeated token costs a map lookup. Keyed by the token itself,
 * as Envoy's jwt_authn cache is: a SHA-256 per request cost 2 µs of the publish path's gate budget, and the token
 * is in the process's memory for as long as its request is anyway; what the cache adds is that a token stays there
 * until it expires or is evicted (a heap dump of a gateway holds the bearer tokens of its recent callers: treat
 * one as a secret). Bounded: past `maxEntries`, the least recently used entry goes
 * (a Map keeps insertion order; a hit moves its entry to the end once it is in the older half of the order, so a
 * token in steady use costs a lookup, not a delete and an insert per request, and is never the one to go). Only verified tokens go in; a refusal is never
 * remembered, so nothing refused stays refused for longer than the request.
 */
export class VerifiedTokenCache<T> {
  private readonly entries = new Map<string, Entry<T>>();
  private moves = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: string): T | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    if (entry.touched <= this.moves - this.maxEntries / 2) {
      this.entries.delete(key);
      entry.touched = ++this.moves;
      this.entries.set(key, entry);
    }
    return entry.value;
  }

  set(key: string, value: T, expiresAt: number): void {
    if (this.maxEntries === 0 || expiresAt <= this.now()) return;
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt, touched: ++this.moves });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }
}

import { hash } from 'node:crypto';

interface Entry<T> {
  value: T;
  /** Epoch ms after which the entry is not used (the token's `exp`). */
  expiresAt: number;
}

/**
 * Verified tokens, remembered until they expire so a repeated token costs a hash and a map lookup. Keyed by the
 * SHA-256 of the token (the cache holds no token). Bounded: past `maxEntries`, the least recently used entry goes
 * (a Map keeps insertion order; a hit moves its entry to the end). Only verified tokens go in; a refusal is never
 * remembered, so nothing refused stays refused for longer than the request.
 */
export class VerifiedTokenCache<T> {
  private readonly entries = new Map<string, Entry<T>>();

  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The one-shot `crypto.hash` (half the cost of a Hash object on the hot path). */
  keyOf(token: string): string {
    return hash('sha256', token, 'base64url');
  }

  get(key: string): T | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAt <= this.now()) return undefined;
    this.entries.set(key, entry);
    return entry.value;
  }

  set(key: string, value: T, expiresAt: number): void {
    if (this.maxEntries === 0 || expiresAt <= this.now()) return;
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }
}

/**
 * Reads of a presence table by key (a subscription's holders, an agent's replicas), each remembered for `memoryMs`
 * so that a burst of lookups costs one query. A failed read answers what was read before for that key (or `empty`):
 * the caller then acts on slightly stale rows, or on none, rather than hanging or failing. At most `maxKeys` are
 * remembered (the oldest read is let go first).
 */
export class RecentReads<T> {
  private readonly memory = new Map<string, { at: number; value: Promise<T>; settled?: T }>();

  constructor(
    private readonly read: (key: string) => Promise<T>,
    private readonly memoryMs: number,
    private readonly empty: T,
    private readonly maxKeys = 10_000,
  ) {}

  get(key: string): Promise<T> {
    const known = this.memory.get(key);
    if (known && Date.now() - known.at < this.memoryMs) return known.value;
    const value = this.read(key).catch(() => known?.value ?? this.empty);
    const entry: { at: number; value: Promise<T>; settled?: T } = { at: Date.now(), value };
    void value.then((v) => (entry.settled = v));
    this.memory.set(key, entry);
    if (this.memory.size > this.maxKeys) this.memory.delete(this.memory.keys().next().value!);
    return value;
  }

  /**
   * What `get` would answer at once, without a promise: the read of `key` within its memory, once it has come back;
   * undefined when there is none (never read, read too long ago, or still being read).
   */
  peek(key: string): T | undefined {
    const known = this.memory.get(key);
    return known && Date.now() - known.at < this.memoryMs ? known.settled : undefined;
  }

  /** Forgets what was read of `key` (what it named turned out to be gone). */
  forget(key: string): void {
    this.memory.delete(key);
  }
}

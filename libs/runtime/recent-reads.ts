/**
 * Reads of a presence table by key (a subscription's holders, an agent's replicas), each remembered for `memoryMs`
 * so that a burst of lookups costs one query. A failed read answers what was read before for that key (or `empty`):
 * the caller then acts on slightly stale rows, or on none, rather than hanging or failing. At most `maxKeys` are
 * remembered (the oldest read is let go first).
 */
export class RecentReads<T> {
  private readonly memory = new Map<string, { at: number; value: Promise<T> }>();

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
    this.memory.set(key, { at: Date.now(), value });
    if (this.memory.size > this.maxKeys) this.memory.delete(this.memory.keys().next().value!);
    return value;
  }

  /** Forgets what was read of `key` (what it named turned out to be gone). */
  forget(key: string): void {
    this.memory.delete(key);
  }
}

import { DEDUPE_DEFAULTS, dedupeKey, type DedupeBounds, type DedupeStore } from './dedupe-store';

/** A dedupe store in this process's memory: a Map in insertion order, so the oldest entry is evicted first. */
export class MemoryDedupeStore implements DedupeStore {
  private readonly bounds: Required<DedupeBounds>;
  private readonly entries = new Map<string, number>();

  constructor(
    bounds: DedupeBounds = {},
    private readonly now: () => number = Date.now,
  ) {
    this.bounds = { ...DEDUPE_DEFAULTS, ...bounds };
  }

  get size(): number {
    return this.entries.size;
  }

  async seen(source: string, id: string): Promise<boolean> {
    const at = this.entries.get(dedupeKey(source, id));
    return at !== undefined && this.now() - at <= this.bounds.maxAgeMs;
  }

  async record(source: string, id: string): Promise<void> {
    const key = dedupeKey(source, id);
    this.entries.delete(key);
    this.entries.set(key, this.now());
    this.evict();
  }

  private evict(): void {
    const oldest = this.now() - this.bounds.maxAgeMs;
    for (const [key, at] of this.entries) {
      if (this.entries.size <= this.bounds.maxEntries && at >= oldest) break;
      this.entries.delete(key);
    }
  }
}

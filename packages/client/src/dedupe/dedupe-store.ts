/**
 * Where a consumer remembers the events its handler finished, by (source, id), so a redelivery of one is acked
 * without reaching the handler again. A store records an event only after its handler succeeded: an event whose
 * handler failed or is still running is never `seen`.
 */
export interface DedupeStore {
  /** Whether the handler finished (`source`, `id`) and the record has not aged out or been evicted. */
  seen(source: string, id: string): Promise<boolean>;
  /** Records that the handler finished (`source`, `id`). */
  record(source: string, id: string): Promise<void>;
  /** Releases what the store holds (a pool, timers). */
  close?(): Promise<void>;
}

/** Bounds of a dedupe store: at most `maxEntries` ids (oldest evicted first), each kept at most `maxAgeMs`. */
export interface DedupeBounds {
  /** Default 100 000. */
  maxEntries?: number;
  /** Default 24 h. */
  maxAgeMs?: number;
}

export const DEDUPE_DEFAULTS: Required<DedupeBounds> = { maxEntries: 100_000, maxAgeMs: 24 * 3600_000 };

/** The key of (source, id): the source's length first, so no pair of strings makes another pair's key. */
export const dedupeKey = (source: string, id: string): string => `${source.length}:${source}${id}`;

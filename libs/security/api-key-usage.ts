import { createLogger } from '@libs/logging';
import { API_KEY_LAST_USED_RESOLUTION_SECONDS, ApiKeyUse } from '@libs/storage';

/** What the usage recorder writes to: `ApiKeyStore.recordUse`. */
export interface ApiKeyUseWriter {
  recordUse(uses: ApiKeyUse[]): Promise<string[]>;
}

/**
 * The API keys' `last_used_at`, off the request path: a use is remembered in memory (at most one per key per
 * resolution minute) and written in one batch statement every `flushMs`. A failed write is logged and the uses
 * kept for the next flush; the store itself refuses to write a key more than once a minute, so several instances
 * reporting the same key add nothing.
 */
export class ApiKeyUsage {
  private readonly log = createLogger('ApiKeyUsage');
  private readonly pending = new Map<string, Date>();
  /** When each key's use was last queued (epoch ms); pruned once older than the resolution. */
  private readonly queuedAt = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly writer: ApiKeyUseWriter,
    private readonly options: { flushMs?: number; now?: () => number } = {},
  ) {
    this.timer = setInterval(() => void this.flush(), options.flushMs ?? 10_000);
    this.timer.unref();
  }

  /** Notes a use of the key now; a map lookup when the key was noted within the last minute. */
  used(id: string): void {
    const now = (this.options.now ?? Date.now)();
    const last = this.queuedAt.get(id);
    if (last !== undefined && now - last < API_KEY_LAST_USED_RESOLUTION_SECONDS * 1000) return;
    this.queuedAt.set(id, now);
    this.pending.set(id, new Date(now));
  }

  /** Writes the uses noted since the last flush (one statement). */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private async write(): Promise<void> {
    const now = (this.options.now ?? Date.now)();
    for (const [id, at] of this.queuedAt)
      if (now - at >= API_KEY_LAST_USED_RESOLUTION_SECONDS * 1000) this.queuedAt.delete(id);
    if (this.pending.size === 0) return;
    const batch = [...this.pending].map(([id, at]) => ({ id, at }));
    this.pending.clear();
    try {
      await this.writer.recordUse(batch);
    } catch (e) {
      for (const use of batch) if (!this.pending.has(use.id)) this.pending.set(use.id, use.at);
      this.log.warn(
        { keys: batch.length, error: (e as Error).message },
        'API key last-used times not written; kept for the next flush',
      );
    }
  }
}

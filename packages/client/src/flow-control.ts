/**
 * Publish flow control, as in Google Pub/Sub's publisher: at most `maxEvents` events and `maxBytes` bytes published
 * and not yet answered. `acquire` waits (first come, first served) until there is room; one publish larger than
 * the byte bound alone is let through when nothing else is in flight, so it cannot wait forever.
 */
export class FlowControl {
  private events = 0;
  private bytes = 0;
  /** Waiting publishes, first come first served: `waiters[head]` is next (an index, not `shift()`, which copies a long queue). */
  private waiters: { events: number; bytes: number; go: () => void }[] = [];
  private head = 0;

  constructor(
    private readonly maxEvents: number,
    private readonly maxBytes: number,
  ) {}

  get inFlight(): { events: number; bytes: number } {
    return { events: this.events, bytes: this.bytes };
  }

  /** Resolves once `events` and `bytes` fit; the caller must `release` the same amounts when answered. */
  acquire(events: number, bytes: number): Promise<void> {
    if (this.tryAcquire(events, bytes)) return Promise.resolve();
    return new Promise((go) => this.waiters.push({ events, bytes, go }));
  }

  /** Takes the room at once when it fits and nobody waits (true), else takes nothing (false). */
  tryAcquire(events: number, bytes: number): boolean {
    if (this.head !== this.waiters.length || !this.fits(events, bytes)) return false;
    this.take(events, bytes);
    return true;
  }

  release(events: number, bytes: number): void {
    this.events -= events;
    this.bytes -= bytes;
    while (
      this.head < this.waiters.length &&
      this.fits(this.waiters[this.head].events, this.waiters[this.head].bytes)
    ) {
      const next = this.waiters[this.head++];
      this.take(next.events, next.bytes);
      next.go();
    }
    if (this.head === this.waiters.length || this.head > 1024) {
      this.waiters = this.waiters.slice(this.head);
      this.head = 0;
    }
  }

  private fits(events: number, bytes: number): boolean {
    if (this.events === 0) return true;
    return this.events + events <= this.maxEvents && this.bytes + bytes <= this.maxBytes;
  }

  private take(events: number, bytes: number): void {
    this.events += events;
    this.bytes += bytes;
  }
}

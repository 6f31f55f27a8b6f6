import { createLogger } from '@libs/logging';

/**
 * A process's rows in a presence table (stream clients, session agent replicas, session quota usage), written at
 * once on a change and renewed every `periodMs` while the process runs. One write at a time: a change during a write
 * is written right after it, once, however many changes came meanwhile. A failed write is logged and retried at the
 * next renewal (readers see the row a little later, or a stale row a little longer, until it ages out).
 */
export class CoalescingRenewal {
  private readonly log;
  private timer?: NodeJS.Timeout;
  private writing?: Promise<void>;
  private again = false;
  private closed = false;

  constructor(
    /** Names the rows in the log: `cannot renew the <what>; retried`. */
    private readonly what: string,
    private readonly periodMs: number,
    private readonly write: () => Promise<void>,
  ) {
    this.log = createLogger(`Renewal(${what})`);
  }

  start(): void {
    this.timer = setInterval(() => this.renew(), this.periodMs);
    this.timer.unref();
  }

  /** Writes now, or right after the write under way. */
  renew(): void {
    if (this.closed) return;
    if (this.writing) {
      this.again = true;
      return;
    }
    this.writing = this.write()
      .catch((e: Error) => this.log.warn({ error: e.message }, `cannot renew the ${this.what}; retried`))
      .finally(() => {
        this.writing = undefined;
        if (this.again) {
          this.again = false;
          this.renew();
        }
      });
  }

  /** Stops renewing, from a write too (its holder was fenced: it may write no more). */
  stop(): void {
    this.closed = true;
    clearInterval(this.timer);
  }

  /** Stops renewing; resolves once no write is under way (the caller then deletes its rows). */
  async close(): Promise<void> {
    this.stop();
    while (this.writing) await this.writing;
  }
}

/**
 * A reader's credit given back as its application consumes what it received (a Mode 1 session's chunks, a
 * subscription's publications): coalesced to one credit frame per turn of the event loop, at once when half the
 * window is owed, so a reader keeping up sends few frames and one that stopped owes nothing it consumed.
 */
export class CreditReturn {
  /** The window the runtime granted (what "half the window" is of). */
  window = 0;
  private owed = 0;
  private flushing = false;

  constructor(
    /** Sends a credit frame of `n` bytes; false when the connection is not open (what is owed stays owed). */
    private readonly send: (n: number) => boolean,
    /** Whether the reader is over (nothing is given back any more). */
    private readonly over: () => boolean,
  ) {}

  consumed(bytes: number): void {
    if (bytes <= 0 || this.over()) return;
    this.owed += bytes;
    if (this.owed >= this.window / 2) return this.flush();
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => {
      this.flushing = false;
      this.flush();
    });
  }

  /** A new window (a subscription made again): nothing is owed on it. */
  reset(window: number): void {
    this.window = window;
    this.owed = 0;
  }

  private flush(): void {
    if (this.owed === 0 || this.over()) return;
    if (this.send(this.owed)) this.owed = 0;
  }
}

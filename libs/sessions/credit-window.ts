/**
 * One session's flow control as the runtime enforces it, where the writer's bytes enter the runtime (the agent's
 * instance in Mode 1): the reader grants `window` bytes at open, every chunk takes its length, and the reader gives
 * back what it consumed. What is in flight (taken and not given back) never exceeds the window: a chunk that does not
 * fit is refused (the writer ignored its credit: the session ends), and a grant beyond what is in flight is cut to it
 * (a reader cannot grant the writer more than the window). So whatever the speeds, the runtime holds at most `window`
 * bytes of a session's data, wherever they are on the way.
 */
export class CreditWindow {
  private inFlight = 0;
  /** Times the writer's credit fell below one largest chunk (it may have had to wait): a credit stall. */
  stalls = 0;
  private stalled = false;

  constructor(
    readonly window: number,
    /** The largest chunk; credit below it counts as a stall. */
    private readonly maxChunk: number,
  ) {}

  /** Bytes the writer may still send. */
  get available(): number {
    return this.window - this.inFlight;
  }

  get held(): number {
    return this.inFlight;
  }

  /** A chunk of `bytes` from the writer: false when it does not fit in the credit left (a flow-control violation). */
  take(bytes: number): boolean {
    if (bytes > this.available) return false;
    this.inFlight += bytes;
    if (!this.stalled && this.available < this.maxChunk) {
      this.stalled = true;
      this.stalls++;
    }
    return true;
  }

  /** The reader gives back `bytes`; answers what is given to the writer (cut to what was in flight). */
  give(bytes: number): number {
    if (!(bytes > 0)) return 0;
    const given = Math.min(Math.floor(bytes), this.inFlight);
    this.inFlight -= given;
    if (this.available >= this.maxChunk) this.stalled = false;
    return given;
  }
}

/**
 * One answer of an expensive read (a backend probe, a table count), shared: every caller within `ttlMs` of the
 * last answer gets that answer, and callers while a read runs wait for that read instead of starting their own.
 * So however often an unauthenticated probe or a scraper calls, the backends see at most one read per `ttlMs`.
 * A read that fails is not kept: the next caller reads again (its failure is still shared with the callers that
 * waited for it).
 */
export class SharedRead<T> {
  private last?: { at: number; value: T };
  private running?: Promise<T>;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly ttlMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get(): Promise<T> {
    if (this.last && this.now() - this.last.at < this.ttlMs) return Promise.resolve(this.last.value);
    this.running ??= this.read().then(
      (value) => {
        this.last = { at: this.now(), value };
        this.running = undefined;
        return value;
      },
      (e: unknown) => {
        this.running = undefined;
        throw e;
      },
    );
    return this.running;
  }
}

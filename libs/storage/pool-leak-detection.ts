import pg, { Pool, PoolClient, PoolConfig } from 'pg';
import { createLogger, Logger } from '@libs/logging';

/** Stack frames kept of a checkout's acquirer (V8 keeps 10 by default; a TypeORM call alone takes about as many). */
const ACQUIRER_STACK_FRAMES = 40;

/** What the pool of a DataSource reports of its checkouts (read when scraped, `eventmesh_postgres_pool_leaks_total`). */
export interface PoolCheckoutStats {
  /** Connections checked out now. */
  checkedOut: number;
  /** Checkouts held past the threshold so far (each counted once, when it crossed it). */
  leaks: number;
}

interface Checkout {
  since: number;
  /** Holds the acquirer's stack (V8 formats it only when read). */
  acquirer: { stack?: string };
  timer: NodeJS.Timeout;
  reported: boolean;
}

/**
 * Pool checkout leak detection, as HikariCP's `leakDetectionThreshold`: a connection checked out of the pool for
 * longer than `thresholdMs` is reported with the stack of the code that took it (captured at each checkout, which
 * is why it is off unless configured: EVENTMESH_POSTGRES_LEAK_DETECTION_THRESHOLD_MS), the statement it has in
 * flight if any (none: its holder awaits something else while holding it, which no statement deadline can end),
 * and the pool's counts. Reported once per checkout, when it crosses the threshold, and counted; when such a
 * connection comes back, how long it was held is logged too. A report is a suspicion, not a verdict: a long
 * legitimate transaction is reported the same way, so set the threshold above the longest one expected.
 */
export class PoolLeakDetector {
  private readonly out = new Map<PoolClient, Checkout>();
  private leaks = 0;

  constructor(
    readonly thresholdMs: number,
    /** The pool's name in the log lines (the DataSource's application name). */
    readonly pool: string,
    readonly log: Logger = createLogger('PostgresPool'),
  ) {}

  stats(): PoolCheckoutStats {
    return { checkedOut: this.out.size, leaks: this.leaks };
  }

  /** The stack of the caller of `below` (a frame of the pool, left out), kept unformatted. */
  acquirer(below: (...args: never[]) => unknown): { stack?: string } {
    const holder: { stack?: string } = {};
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = ACQUIRER_STACK_FRAMES;
    Error.captureStackTrace(holder, below);
    Error.stackTraceLimit = limit;
    return holder;
  }

  /** `client` was handed to the code whose stack `acquirer` holds; `counts` reads the pool's counts when reporting. */
  checkedOut(client: PoolClient, acquirer: { stack?: string }, counts: () => Record<string, number>): void {
    this.returned(client);
    const checkout: Checkout = {
      since: performance.now(),
      acquirer,
      reported: false,
      timer: undefined as unknown as NodeJS.Timeout,
    };
    this.watch(client, checkout, counts, this.thresholdMs);
    this.out.set(client, checkout);
  }

  /** `client` went back to the pool (or was dropped by it). */
  returned(client: PoolClient, error?: unknown): void {
    const checkout = this.out.get(client);
    if (!checkout) return;
    clearTimeout(checkout.timer);
    this.out.delete(client);
    if (checkout.reported) {
      this.log.info(
        {
          pool: this.pool,
          heldMs: heldFor(checkout),
          releasedWithError: error instanceof Error ? error.message : undefined,
        },
        'a Postgres connection reported as held past the leak detection threshold went back to the pool',
      );
    }
  }

  /** Forgets every checkout (the pool ended). */
  clear(): void {
    for (const checkout of this.out.values()) clearTimeout(checkout.timer);
    this.out.clear();
  }

  /**
   * Reports `checkout` once it has been held for the threshold. A timer fires by the event loop's clock, read once per
   * turn of the loop, which may lag the moment of the checkout by a few milliseconds: one that fires before the
   * threshold has passed by the monotonic clock is set again for the rest, so no report says less than the threshold.
   */
  private watch(client: PoolClient, checkout: Checkout, counts: () => Record<string, number>, ms: number): void {
    checkout.timer = setTimeout(() => {
      const rest = this.thresholdMs - (performance.now() - checkout.since);
      if (rest > 0) this.watch(client, checkout, counts, Math.ceil(rest));
      else this.report(client, checkout, counts());
    }, ms);
    checkout.timer.unref();
  }

  private report(client: PoolClient, checkout: Checkout, counts: Record<string, number>): void {
    checkout.reported = true;
    this.leaks++;
    // pg keeps the statement on the wire here (no public accessor); undefined: nothing in flight on this connection.
    const active = (
      client as unknown as { _getActiveQuery?: () => { text?: string } | null | undefined }
    )._getActiveQuery?.();
    this.log.warn(
      {
        pool: this.pool,
        heldMs: heldFor(checkout),
        thresholdMs: this.thresholdMs,
        statementInFlight: active ? (active.text ?? '(a prepared or non-text statement)').slice(0, 200) : null,
        ...counts,
        acquiredBy: (checkout.acquirer.stack ?? '')
          .split('\n')
          .slice(1)
          .map((l) => l.trim()),
      },
      'a Postgres connection has been checked out of the pool for longer than the leak detection threshold; acquiredBy is the stack of the code that took it',
    );
  }
}

/**
 * A pg Pool whose checkouts `detector` watches: `connect` (which `pool.query` and TypeORM's query runners call)
 * captures its caller's stack and hands the client to the detector; the pool's `release` event hands it back.
 */
export function leakDetectingPool(detector: PoolLeakDetector): typeof Pool {
  class LeakDetectingPool extends Pool {
    constructor(config?: PoolConfig) {
      super(config);
      this.on('release', (error: Error | undefined, client: PoolClient) => detector.returned(client, error));
    }

    // pg's connect has a promise and a callback form; this one serves both.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override connect(...args: any[]): any {
      const acquirer = detector.acquirer(LeakDetectingPool.prototype.connect);
      const counts = () => ({ poolTotal: this.totalCount, poolIdle: this.idleCount, poolWaiting: this.waitingCount });
      const callback = args[0] as
        ((err: Error | undefined, client?: PoolClient, done?: (release?: unknown) => void) => void) | undefined;
      if (typeof callback === 'function') {
        super.connect((err, client, done) => {
          if (!err && client) detector.checkedOut(client, acquirer, counts);
          callback(err, client, done);
        });
        return undefined;
      }
      return super.connect().then((client) => {
        detector.checkedOut(client, acquirer, counts);
        return client;
      });
    }

    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override end(...args: any[]): any {
      detector.clear();
      return (super.end as (...a: unknown[]) => unknown).apply(this, args);
    }
  }
  return LeakDetectingPool;
}

/** The pg module as TypeORM's `driver` option takes it, with `Pool` replaced (everything else read through to pg). */
export function pgWithPool(PoolClass: typeof Pool): typeof pg {
  return Object.create(pg, { Pool: { value: PoolClass, enumerable: true } }) as typeof pg;
}

/** Whole milliseconds `checkout` has been held, by the monotonic clock (a wall clock that steps back cannot shorten it). */
function heldFor(checkout: Checkout): number {
  return Math.floor(performance.now() - checkout.since);
}

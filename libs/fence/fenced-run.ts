import { describeScope, StaleEpochError, type FencedScope, type WriteFence } from './epoch-fence';

/** Where a run's warnings go, message first (Temporal's activity log has this shape; adapt a pino logger to it). */
export interface FencedRunLog {
  warn(message: string, fields: Record<string, unknown>): void;
}

/** The work of one run, opened under its epoch: a dispatch loop, a partition loop, a connector job's loop. */
export interface FencedBody<R> {
  /** Works until the run's stop signal aborts (or its own end), every write through the run's fence. */
  run(): Promise<R>;
  /** Reports that the body is alive (a Temporal heartbeat with its progress); called on the run's clock. */
  heartbeat(): void;
  /** Called at every beat before the heartbeat, stuck or not (the caller's own checks). */
  onBeat?(): void;
  /** When the body last completed a round (`Date.now()`); absent: the body is never taken for stuck. */
  lastRoundAt?(): number;
  /** Releases what opening the body took; awaited once the body ended, whatever ended it. */
  close?(): Promise<void>;
}

/** Why a run stopped fenced: a write under its epoch, or its renewal, was refused. */
export interface FencedRefusal {
  epoch: number;
  message: string;
}

/** Renewing the epoch on the run's clock, one renewal at a time. */
export interface FencedRenewal {
  /** False when the row moved past `epoch` (a newer run, a takeover): the body is stopped and the run fenced. */
  renew(epoch: number): Promise<boolean>;
  /** How long after the last renewal the next one is due; absent: at every beat. */
  everyMs?: number;
  /**
   * Whether the renewal tells others that the run is alive (`dispatch_runs.renewed_at`, which a takeover reads),
   * so it is withheld with the heartbeat while the body is stuck; false when it only confirms the epoch to the run
   * itself (a partition's gate), which it must go on doing while the body waits.
   */
  meansAlive: boolean;
  /** A renewal held: the epoch was still the run's when it was asked, at `askedAt`. */
  onHeld?(askedAt: number): void;
}

export interface FencedRun<R> {
  /** What the epoch fences; named in the log lines and in a refused renewal. */
  scope: FencedScope;
  log: FencedRunLog;
  /** Takes the run's epoch (throws when it may not run at all). */
  claim(): Promise<number>;
  fenceFor(epoch: number): WriteFence;
  /**
   * Opens the body under the claimed epoch; `stop` aborts when the run must end, `fencedOff` (with it) when it ends
   * because its renewal was refused: another run holds the epoch, and what the body holds unfinished is theirs.
   */
  open(run: {
    epoch: number;
    fence: WriteFence;
    stop: AbortSignal;
    fencedOff: AbortSignal;
  }): FencedBody<R> | Promise<FencedBody<R>>;
  /** Whatever else ends the run (cancellation, shutdown, a deadline): the body returns normally. */
  stop: AbortSignal;
  /** The clock of the heartbeat and the renewal. */
  beatEveryMs: number;
  /** A body that made no round for this long is stuck; a renewal pending this long is reported. Absent: never. */
  leaseTtlMs?: number;
  /** Absent: the run never renews; the fence alone stops it, at its next write after a newer claim. */
  renewal?: FencedRenewal;
  /** Whether an error of the body is a refused fenced write; by default a {@link StaleEpochError}. */
  isFenced?(e: unknown): boolean;
  /** What the run ends with when it was fenced: a failure for the caller to throw, or a result. */
  fenced(refusal: FencedRefusal): R;
}

/** How the log lines name a run (it renews) and its loop (it makes rounds), per kind of scope. */
const NAMES: Record<FencedScope['kind'], { run: string; loop: string }> = {
  partition: { run: 'partition run', loop: 'partition loop' },
  'dispatch-run': { run: 'dispatch run', loop: 'dispatch loop' },
  'connector-job': { run: 'connector job run', loop: 'connector job loop' },
};

/**
 * One run of a loop that holds an epoch: claim it, open the body behind its fence, heartbeat and renew it on one
 * clock while the body works, and end it fenced when a write or a renewal under the epoch is refused. What the
 * three loops (dispatch runs, partition leases, connector jobs) share, so the fence is one thing to read; the
 * heartbeat itself, the failures and the cancellation are the caller's (this lib knows no Temporal).
 *
 * The heartbeat goes out only while the body made a round within a lease TTL: a body stuck that long (a hung
 * dependency) loses it, so Temporal starts the activity afresh and a newer claim fences this one. One renewal is in
 * flight at a time; one pending for a lease TTL is reported once (every statement has a deadline, so something
 * waits outside one, and a takeover reads the run as dead meanwhile).
 */
export async function runFenced<R>(spec: FencedRun<R>): Promise<R> {
  const epoch = await spec.claim();
  const fence = spec.fenceFor(epoch);
  const name = NAMES[spec.scope.kind];
  const fields = { fenced: describeScope(spec.scope), epoch };
  const ttlMs = spec.leaseTtlMs ?? Infinity;
  const refused = new AbortController();
  let refusal: string | undefined;
  const body = await spec.open({
    epoch,
    fence,
    stop: AbortSignal.any([spec.stop, refused.signal]),
    fencedOff: refused.signal,
  });

  // When the renewal in flight started (0: none), and whether its slowness was reported.
  let renewingSince = 0;
  let slowRenewalReported = false;
  let renewAskedAt = Date.now();
  const renew = (renewal: FencedRenewal) => {
    if (renewingSince !== 0) {
      if (!slowRenewalReported && Date.now() - renewingSince >= ttlMs) {
        slowRenewalReported = true;
        spec.log.warn(`${name.run} renewal pending for more than a lease TTL`, {
          ...fields,
          pendingMs: Date.now() - renewingSince,
        });
      }
      return;
    }
    if (Date.now() - renewAskedAt < (renewal.everyMs ?? 0)) return;
    const askedAt = (renewingSince = renewAskedAt = Date.now());
    slowRenewalReported = false;
    renewal
      .renew(epoch)
      .then((held) => {
        if (held) return renewal.onHeld?.(askedAt);
        refusal = `${describeScope(spec.scope)} moved past epoch ${epoch}; its renewal was refused`;
        refused.abort();
      })
      .catch((e: unknown) => spec.log.warn(`${name.run} renewal failed`, { ...fields, error: (e as Error).message }))
      .finally(() => (renewingSince = 0));
  };
  const beat = setInterval(() => {
    body.onBeat?.();
    const stuck = body.lastRoundAt !== undefined && Date.now() - body.lastRoundAt() >= ttlMs;
    const renewal = spec.renewal;
    if (stuck) {
      const withheld = renewal?.meansAlive ? 'the heartbeat and the renewal' : 'the heartbeat';
      spec.log.warn(`${name.loop} made no round within a lease TTL; withholding ${withheld}`, fields);
    } else body.heartbeat();
    if (renewal && !(stuck && renewal.meansAlive)) renew(renewal);
  }, spec.beatEveryMs);

  let result: R;
  try {
    result = await body.run();
  } catch (e) {
    if ((spec.isFenced ?? isStaleEpoch)(e)) return spec.fenced({ epoch, message: (e as Error).message });
    throw e;
  } finally {
    clearInterval(beat);
    await body.close?.();
  }
  return refusal === undefined ? result : spec.fenced({ epoch, message: refusal });
}

function isStaleEpoch(e: unknown): boolean {
  return e instanceof StaleEpochError;
}

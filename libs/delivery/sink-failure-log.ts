import type { Logger } from '@libs/logging';

/** What became of one failed delivery attempt. */
export type FailureOutcome = 'retrying' | 'parked' | 'held' | 'deadLettered' | 'requestDropped';

/** The default period of the summary lines (EVENTMESH_LOG_SINK_FAILURE_SUMMARY_MS). */
export const DEFAULT_SINK_FAILURE_SUMMARY_MS = 60_000;

interface SinkFailures {
  subscription: string;
  sink: string | null;
  /** When the current period began (its first failure was logged in full, or the last summary written). */
  since: number;
  /** Failures of this period not logged in full, by outcome. */
  counts: Record<FailureOutcome, number>;
  unlogged: number;
  last?: Record<string, unknown>;
}

const noCounts = (): Record<FailureOutcome, number> => ({
  retrying: 0,
  parked: 0,
  held: 0,
  deadLettered: 0,
  requestDropped: 0,
});

/**
 * The delivery failure log of one dispatch loop: a sink that keeps failing is not logged once per attempt. The
 * first failure of a subscription's sink is logged in full (`first`); the ones after it within the period are
 * counted, and one summary line per period says how many there were, by outcome, with the last one's position and
 * error. A period without any failure ends it: the next failure is logged in full again. The loop calls `tick()`
 * each round and `flush()` when it stops.
 */
export class SinkFailureLog {
  private readonly sinks = new Map<string, SinkFailures>();

  constructor(
    private readonly log: Logger,
    private readonly periodMs = DEFAULT_SINK_FAILURE_SUMMARY_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * One failed attempt of `subscription`'s sink: `fields` (subscription, topic, partition, offset, eventId, error,
   * ...) and `message` are the full line, written when it is the sink's first failure of the period.
   */
  failed(
    subscription: string,
    sink: string | null,
    outcome: FailureOutcome,
    fields: Record<string, unknown>,
    message: string,
  ): void {
    const known = this.sinks.get(subscription);
    if (!known) {
      this.sinks.set(subscription, { subscription, sink, since: this.now(), counts: noCounts(), unlogged: 0 });
      const line = { ...fields, sink, outcome, summaryEveryMs: this.periodMs };
      if (outcome === 'deadLettered') this.log.error(line, message);
      else this.log.warn(line, message);
      return;
    }
    known.counts[outcome]++;
    known.unlogged++;
    known.last = fields;
  }

  /** Writes the summary of every sink whose period is over, and forgets the sinks that did not fail in it. */
  tick(): void {
    const now = this.now();
    for (const [key, s] of this.sinks) {
      if (now - s.since < this.periodMs) continue;
      if (s.unlogged === 0) {
        this.sinks.delete(key);
        continue;
      }
      this.summarise(s, now);
    }
  }

  /** Writes every pending summary (the loop stops) and forgets every sink. */
  flush(): void {
    const now = this.now();
    for (const s of this.sinks.values()) if (s.unlogged > 0) this.summarise(s, now);
    this.sinks.clear();
  }

  private summarise(s: SinkFailures, now: number): void {
    const line = {
      subscription: s.subscription,
      sink: s.sink,
      failures: s.unlogged,
      ...s.counts,
      periodMs: now - s.since,
      last: s.last,
    };
    const message = `delivery to this sink keeps failing: ${s.unlogged} more failed attempts since the last line`;
    if (s.counts.deadLettered > 0) this.log.error(line, message);
    else this.log.warn(line, message);
    s.since = now;
    s.counts = noCounts();
    s.unlogged = 0;
    s.last = undefined;
  }
}

import type { Lanes } from './lane';

/** What the loop reports; the activity sends it as its heartbeat details. */
export interface DispatchProgress {
  rounds: number;
  delivered: number;
  failedAttempts: number;
  parked: number;
  deadLettered: number;
  /** Events a subscription's filters passed over. */
  filteredOut: number;
  /** Replayed events that were dead-lettered before (by a run that crashed before its commit): passed over. */
  passedOverDeadLettered?: number;
  subscriptions: number;
  partitions: number;
  /** Events in Kafka not yet settled, summed over every subscription partition. */
  lag: number;
  /** The lowest offset some lane has not settled (with a scope: what a new owner would start from). */
  committedOffset?: number;
  /** The highest log end offset seen. */
  highWatermark?: number;
  /** Rounds in which the gate held the loop back. */
  gatedRounds: number;
  /** Ranges of events Kafka retention deleted before delivery, recorded (skipped_ranges), and the events in them. */
  skippedRanges: number;
  skippedEvents: number;
  /** Times a subscription's circuit breaker opened (from closed, or after a failed probe). */
  breakerOpenings: number;
  /** Subscriptions whose breaker is open or half-open now. */
  openBreakers: number;
  /** Failing events held at the head of their lane because their subscription had its cap of parked deliveries. */
  heldAtParkingCap: number;
  /** `key` ordering: events parked behind an earlier parked event of their key, without an attempt (held-keys.ts). */
  parkedBehind?: number;
  /** Parked deliveries delivered by ordered recovery (in offset order, before new events). */
  recovered: number;
  /** Lanes restarted from new offsets because an operator's seek moved them (dispatch-loop.ts, `refresh`). */
  seeksApplied?: number;
  /** Commits refused as BACKWARDS: the stored offset was already past the lane (offset-committer.ts). */
  commitsBehind: number;
  committedAt?: string;
}

export function newProgress(): DispatchProgress {
  return {
    rounds: 0,
    delivered: 0,
    failedAttempts: 0,
    parked: 0,
    deadLettered: 0,
    filteredOut: 0,
    passedOverDeadLettered: 0,
    subscriptions: 0,
    partitions: 0,
    lag: 0,
    gatedRounds: 0,
    commitsBehind: 0,
    skippedRanges: 0,
    skippedEvents: 0,
    breakerOpenings: 0,
    openBreakers: 0,
    heldAtParkingCap: 0,
    recovered: 0,
    seeksApplied: 0,
  };
}

/** Lag, the lowest committed offset and the highest watermark over the lanes, into `progress`. */
export function measure(progress: DispatchProgress, lanes: Lanes): void {
  let lag = 0;
  let committed: number | undefined;
  let high: number | undefined;
  for (const lane of lanes.values()) {
    lag += Math.max(0, lane.highWatermark - lane.nextOffset);
    committed = committed === undefined ? lane.committed : Math.min(committed, lane.committed);
    high = high === undefined ? lane.highWatermark : Math.max(high, lane.highWatermark);
  }
  progress.lag = lag;
  progress.committedOffset = committed;
  progress.highWatermark = high;
}

import type { DispatchProgress } from '../../contracts';
import type { Lanes } from './lane';

// Declared with the Temporal contracts (the dispatch activities return it); exported here for the loop's users.
export type { DispatchProgress };

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

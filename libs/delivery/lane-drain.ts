import type { DispatchContext } from './dispatch-context';
import { fillOf, type Lane } from './lane';
import { refillAt } from './partition-feed';

/** How a piece of a lane's work ended: settled, waiting for its retry in the lane, or the lane must stop starting. */
export type LaneOutcome = 'settled' | 'retry' | 'halt';

/** What a lane's drain started in one round, and when to look again if nothing ends first (0: only then). */
export interface Started {
  started: Iterable<Promise<LaneOutcome>>;
  wakeAt?: number;
}

/**
 * The loop of a lane's drain, for events (lane-runner.ts) and batches (batch-lanes.ts) alike: each round moves the
 * offset over the settled front, has `start` start up to the room left of `depth`, asks the loop for more records
 * when what settled (or, in a stream lane, what went out) left the lane low, and waits with one promise, whatever is
 * out (a race over what is out would cost as much as what is out, at every wake of a stream lane with a thousand
 * deliveries out): for a piece to end; with room, also for records to arrive (the feed nudges the lane); and until
 * `wakeAt`. It stops starting once a piece halted, the lane closed or the gate shut, and ends when nothing is out.
 * Answers the last round's `wakeAt`, and the first failure a piece threw (thrown by the caller once it set the lane's
 * retry).
 */
export async function drainLane(
  ctx: Pick<DispatchContext, 'deps' | 'wake' | 'gateOpen'>,
  lane: Lane,
  depth: number,
  start: (room: number) => Started,
): Promise<{ wakeAt: number; failure?: { error: unknown } }> {
  const refill = refillAt(ctx.deps.options.batchMaxEvents);
  let out = 0;
  let halted = false;
  let failure: { error: unknown } | undefined;
  let wakeAt = 0;
  /** Ends the lane's wait: a piece ended, or (while the lane has room) records arrived. */
  let wake: (() => void) | undefined;
  const ended = () => {
    out--;
    wake?.();
  };
  for (;;) {
    wakeAt = 0;
    const before = fillOf(lane);
    while (lane.buffer.length > 0 && lane.buffer[0].state === 'settled')
      lane.nextOffset = lane.buffer.shift()!.offset + 1;
    if (!halted && out < depth && !lane.abort.signal.aborted && ctx.gateOpen()) {
      const round = start(depth - out);
      for (const piece of round.started) {
        out++;
        piece.then(
          (outcome) => {
            halted ||= outcome === 'halt';
            ended();
          },
          (error: unknown) => {
            halted = true;
            failure ??= { error };
            ended();
          },
        );
      }
      wakeAt = round.wakeAt ?? 0;
    }
    if (before >= refill && fillOf(lane) < refill) ctx.wake();
    if (out === 0) break;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      wake = resolve;
      if (out < depth) lane.nudge = resolve;
      if (wakeAt > 0) timer = setTimeout(resolve, Math.max(0, wakeAt - Date.now()));
    });
    clearTimeout(timer);
    wake = undefined;
    lane.nudge = undefined;
  }
  return { wakeAt, failure };
}

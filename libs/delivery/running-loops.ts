import type { BreakerState } from './circuit-breaker';

/** One lane of a running loop, as metrics show it: events in Kafka its subscription has not settled yet. */
export interface LaneLag {
  subscriptionId: string;
  topic: string;
  partition: number;
  lag: number;
}

/** What a running dispatch loop tells readiness and metrics. */
export interface ObservedLoop {
  /** When it last completed a round (epoch ms). */
  readonly lastRoundAt: number;
  /** PARTITION_OWNED_PULL: the partition it owns; absent for an instance's dispatch loop. */
  readonly scope?: { topic: string; partition: number };
  laneLags(): LaneLag[];
  /** Each subscription it dispatches, with its sink's circuit breaker state. */
  breakerStates(): { subscriptionId: string; state: BreakerState }[];
}

/**
 * The dispatch loops running in this instance now: each loop joins when its run starts and leaves when it ends.
 * `/health/ready` reads how recently each completed a round; `/metrics` reads their lanes' lag and breakers.
 */
export class RunningLoops {
  private readonly loops = new Set<ObservedLoop>();

  add(loop: ObservedLoop): void {
    this.loops.add(loop);
  }

  delete(loop: ObservedLoop): void {
    this.loops.delete(loop);
  }

  values(): ObservedLoop[] {
    return [...this.loops];
  }
}

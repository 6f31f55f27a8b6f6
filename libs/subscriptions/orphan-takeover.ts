import type { OrphanTakeoverMode } from '@libs/config';
import { createLogger } from '@libs/logging';
import { reasonOf } from '@libs/runtime';
import type { PlacementMove, PlacementStore } from '@libs/storage';

export interface OrphanTakeoverOptions {
  /** This instance: the one that takes orphans over. */
  instanceId: string;
  /** The topics this instance serves; it takes only orphans it can dispatch. */
  topics: string[];
  graceMs: number;
  mode: OrphanTakeoverMode;
}

export interface OrphanTakeoverStatus {
  mode: OrphanTakeoverMode;
  graceMs: number;
  intervalMs: number;
  rounds: number;
  /** Orphans seen in the last round (of every instance, on every topic). */
  orphans: number;
  /** Subscriptions this instance took over since it started. */
  taken: number;
  lastError?: string;
}

/**
 * The automatic takeover of orphaned subscriptions in LOCAL_STICKY_PULL (docs/topologies.md#orphaned-subscriptions).
 * Every round (a quarter of the grace, between 1 and 30 seconds) it reads the orphans and logs each new one at
 * WARN; with `AUTOMATIC`, and only while this instance's own dispatch run is live, it takes its fair share of
 * them (the orphans it can dispatch divided by the live instances, rounded up) with the fenced move of
 * {@link PlacementStore.takeOrphans}, so survivors spread them and never both take one. Its dispatch loop picks
 * them up at its next refresh and resumes from their committed offsets.
 */
export class OrphanTakeover {
  private readonly log = createLogger('OrphanTakeover');
  readonly intervalMs: number;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;
  /** Orphans already reported, so each is logged once while it stays one. */
  private reported = new Set<string>();
  private notLiveReported = false;
  private readonly counts = { rounds: 0, orphans: 0, taken: 0, lastError: undefined as string | undefined };

  constructor(
    private readonly store: PlacementStore,
    private readonly options: OrphanTakeoverOptions,
  ) {
    this.intervalMs = OrphanTakeover.intervalFor(options.graceMs);
  }

  /** A quarter of the grace, bounded to 1 to 30 seconds: an orphan waits at most grace + interval. */
  static intervalFor(graceMs: number): number {
    return Math.min(30_000, Math.max(1000, Math.floor(graceMs / 4)));
  }

  start(): void {
    this.log.info(
      { mode: this.options.mode, graceMs: this.options.graceMs, intervalMs: this.intervalMs },
      'watching for orphaned subscriptions',
    );
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  status(): OrphanTakeoverStatus {
    return { mode: this.options.mode, graceMs: this.options.graceMs, intervalMs: this.intervalMs, ...this.counts };
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.round()
        .then(() => (this.counts.lastError = undefined))
        .catch((e: unknown) => {
          this.counts.lastError = reasonOf(e);
          this.log.warn({ error: reasonOf(e) }, 'orphan takeover round failed; trying again next round');
        })
        .finally(() => this.schedule());
    }, this.intervalMs);
  }

  /** One round: report the orphans, and take this instance's share of them (AUTOMATIC). What it took. */
  async round(): Promise<PlacementMove[]> {
    const { instanceId, topics, graceMs, mode } = this.options;
    this.counts.rounds++;
    const orphans = await this.store.orphans(graceMs);
    this.counts.orphans = orphans.length;
    const now = new Set(orphans.map((o) => o.subscriptionId));
    for (const o of orphans) {
      if (this.reported.has(o.subscriptionId)) continue;
      this.log.warn(
        {
          subscription: o.subscriptionId,
          topic: o.topic,
          instance: o.instanceId,
          lastRenewedAt: o.lastRenewedAt?.toISOString() ?? null,
          orphanedSince: o.orphanedSince.toISOString(),
          graceMs,
          takeover: mode,
        },
        'orphaned subscription: its instance has no live dispatch run, so nobody delivers it',
      );
    }
    this.reported = now;
    const takeable = orphans.filter((o) => o.instanceId !== instanceId && topics.includes(o.topic));
    if (mode !== 'AUTOMATIC' || takeable.length === 0) return [];
    const live = await this.store.liveInstances(graceMs);
    if (!live.includes(instanceId)) {
      if (!this.notLiveReported)
        this.log.warn(
          { instance: instanceId, graceMs },
          "not taking orphans over: this instance's own dispatch run is not live",
        );
      this.notLiveReported = true;
      return [];
    }
    this.notLiveReported = false;
    const share = Math.ceil(takeable.length / live.length);
    const { moves, skippedInstances } = await this.store.takeOrphans(instanceId, topics, graceMs, share);
    for (const move of moves) {
      this.log.warn(
        { subscription: move.subscriptionId, from: move.from, to: move.to, epoch: move.fencedEpoch },
        "took over an orphaned subscription; the old instance's dispatch run is fenced at this epoch",
      );
    }
    if (skippedInstances.length > 0)
      this.log.info(
        { instances: skippedInstances },
        'orphans of these instances left for a later round (their dispatch run row is held)',
      );
    this.counts.taken += moves.length;
    return moves;
  }
}

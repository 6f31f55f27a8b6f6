import { setTimeout as sleep } from 'node:timers/promises';
import { CompiledFilter, compileFilters } from '@libs/filter';
import { createLogger } from '@libs/logging';
import type { OffsetPosition, SubscriptionEntity } from '@libs/storage';
import type { WriteFence } from '@libs/fence';
import { CircuitBreakers } from './circuit-breaker';
import { DispatchContext, DispatchLoopDeps, isFenced } from './dispatch-context';
import { FailurePolicy } from './failure-policy';
import { Lane, Lanes, newLane } from './lane';
import { LaneRunner } from './lane-runner';
import { COMMIT_INTERVAL_MS, OffsetCommitter } from './offset-committer';
import { PartitionFeed, pause } from './partition-feed';
import { DispatchProgress, measure, newProgress } from './progress';
import { RetrySweeper } from './retry-sweeper';
import { ownRecordsOnly } from './tenant-records';
import type { BreakerState } from './circuit-breaker';
import type { LaneLag, ObservedLoop } from './running-loops';

export type { Deliverer, DispatchLoopDeps, DispatchLoopOptions } from './dispatch-context';
export { isFenced } from './dispatch-context';
export { FencedError } from './offset-committer';
export type { DispatchProgress } from './progress';

/** How often a loop with a gate checks it, to abort sends in flight when it shuts. */
const GATE_WATCH_MS = 100;
/** How long a run that ends waits for lanes mid-delivery to finish after their abort. */
const SETTLE_LIMIT_MS = 15000;

/**
 * The poll-and-dispatch loop: its lifecycle. Each round it re-reads the subscriptions it dispatches (which lanes
 * exist), fetches what the lanes lack ({@link PartitionFeed}), starts the lanes ({@link LaneRunner}), starts a
 * sweep of the retry table ({@link RetrySweeper}) and commits every lane that moved ({@link OffsetCommitter}).
 * Failed deliveries are decided in one place ({@link FailurePolicy}); counts are in {@link DispatchProgress}.
 * An offset moves past an event only after the sink acknowledged it (or it was parked or dead-lettered), so a
 * crash redelivers and never skips. A write refused for a stale epoch stops the loop (docs/delivery.md).
 */
export class DispatchLoop implements ObservedLoop {
  private readonly log = createLogger('DispatchLoop');
  private readonly lanes = new Lanes();
  private readonly progress = newProgress();
  private readonly breakers: CircuitBreakers;
  private readonly fence: WriteFence;
  private readonly feed: PartitionFeed;
  private readonly runner: LaneRunner;
  private readonly sweeper: RetrySweeper;
  private readonly committer: OffsetCommitter;
  private readonly failures: FailurePolicy;
  /** Aborted while the gate is shut: sends in flight stop at once, so none outlives the owner's lease window. */
  private gateClosed = new AbortController();
  /** Set when a write was refused for a stale epoch; the run ends with it. */
  private fencedBy?: Error;
  private refreshedAt = -Infinity;
  private readonly ignoredTopics = new Set<string>();
  private readonly filters = new Map<string, { version: number; filter: CompiledFilter }>();
  /** Wakes the loop when a lane finishes or a retry comes due. */
  private wake: () => void = () => undefined;
  /** When the loop last completed a round; the activity's heartbeat watchdog reads it. */
  lastRoundAt = Date.now();

  constructor(private readonly deps: DispatchLoopDeps) {
    this.fence = deps.fence;
    this.breakers = new CircuitBreakers(deps.options.breaker);
    const ctx: DispatchContext = {
      deps,
      fence: this.fence,
      lanes: this.lanes,
      progress: this.progress,
      breakers: this.breakers,
      gateOpen: () => this.gateOpen(),
      gateSignal: () => this.watchGate(),
      noteFenced: (e) => this.noteFenced(e),
      wake: () => this.wake(),
    };
    const failures = new FailurePolicy(ctx);
    this.failures = failures;
    this.feed = new PartitionFeed(ctx);
    this.runner = new LaneRunner(ctx, failures);
    this.sweeper = new RetrySweeper(ctx, failures);
    this.committer = new OffsetCommitter(ctx);
  }

  private gateOpen(): boolean {
    return !this.fencedBy && (this.deps.gate?.() ?? true);
  }

  /**
   * The gate's signal as the gate is now: aborted (with the sends in flight) when it shuts, a fresh one when it has
   * opened again. Read by each send as well as every {@link GATE_WATCH_MS}, so a send of a gate opened again never
   * starts with the signal of its closing.
   */
  private watchGate(): AbortSignal {
    const open = this.gateOpen();
    if (!open && !this.gateClosed.signal.aborted) this.gateClosed.abort();
    else if (open && this.gateClosed.signal.aborted) this.gateClosed = new AbortController();
    return this.gateClosed.signal;
  }

  /** A stale-epoch refusal stops every lane; other errors are the caller's. */
  private noteFenced(e: unknown): boolean {
    if (!isFenced(e)) return false;
    if (!this.fencedBy) {
      this.fencedBy = e as Error;
      this.log.warn({ error: (e as Error).message }, 'a write was refused for a stale epoch; this loop stops');
      this.lanes.abortAll();
      this.wake();
    }
    return true;
  }

  get snapshot(): DispatchProgress {
    return { ...this.progress };
  }

  get scope(): { topic: string; partition: number } | undefined {
    return this.deps.scope;
  }

  /** Each lane's events in Kafka not yet settled (as of its last fetch), for metrics. */
  laneLags(): LaneLag[] {
    return [...this.lanes.values()].map((l) => ({
      subscriptionId: l.subscription.id,
      topic: l.topic,
      partition: l.partition,
      lag: Math.max(0, l.highWatermark - l.nextOffset),
    }));
  }

  /** Each subscription this loop dispatches, with its breaker's state, for metrics. */
  breakerStates(): { subscriptionId: string; state: BreakerState }[] {
    const ids = new Set([...this.lanes.values()].map((l) => l.subscription.id));
    return [...ids].map((subscriptionId) => ({ subscriptionId, state: this.breakers.stateOf(subscriptionId) }));
  }

  /** Runs until `stopSignal` aborts or `deadline` (epoch ms) passes; commits what was settled before it returns. */
  async run(
    stopSignal: AbortSignal,
    deadline: number,
    report: (p: DispatchProgress) => void,
  ): Promise<DispatchProgress> {
    const signal = AbortSignal.any([stopSignal, AbortSignal.timeout(Math.max(0, deadline - Date.now()))]);
    // Every run starts from what Postgres holds.
    this.lanes.clear();
    this.sweeper.start();
    this.refreshedAt = -Infinity;
    const watchGate = this.deps.gate ? setInterval(() => this.watchGate(), GATE_WATCH_MS) : undefined;
    this.lastRoundAt = Date.now();
    this.deps.running?.add(this);
    try {
      while (!signal.aborted && !this.fencedBy) {
        if (!this.gateOpen()) {
          // Not confirmed as owner: no fetch, no new delivery; what is in flight finishes.
          this.progress.gatedRounds++;
          this.progress.rounds++;
          this.lastRoundAt = Date.now();
          await pause(Math.min(200, this.deps.options.pollMaxWaitMs), signal);
          continue;
        }
        if (Date.now() - this.refreshedAt >= this.deps.options.refreshIntervalMs) await this.refresh();
        const positions = this.feed.wanted();
        // A fetch waits no longer than until the next refresh: an operator's pause or seek is seen within the
        // refresh interval, not a fetch wait later.
        const refreshDue = this.refreshedAt + this.deps.options.refreshIntervalMs - Date.now();
        const wait = this.feed.waitMs(Math.min(refreshDue, this.deps.options.pollMaxWaitMs));
        if (positions.length > 0) await this.feed.accept(await this.feed.fetch(positions, signal, wait));
        this.runner.kick();
        this.sweeper.tick();
        await this.committer.tick();
        this.failures.failures.tick();
        this.progress.rounds++;
        this.lastRoundAt = Date.now();
        measure(this.progress, this.lanes);
        this.progress.openBreakers = this.breakers.notClosed().length;
        report(this.snapshot);
        if (positions.length === 0) await this.idle(signal);
      }
    } catch (e) {
      if (!this.noteFenced(e)) throw e;
    } finally {
      this.deps.running?.delete(this);
      clearInterval(watchGate);
      this.lanes.abortAll();
      const stopped = this.sweeper.stop();
      await this.settle();
      await stopped;
      // What was counted and not yet said (sink-failure-log.ts).
      this.failures.failures.flush();
      if (!this.fencedBy)
        await this.committer.commit().catch((e: unknown) => {
          if (!this.noteFenced(e)) throw e;
        });
    }
    if (this.fencedBy) throw this.fencedBy;
    return this.snapshot;
  }

  /**
   * Nothing to fetch: wait for a lane to finish or run low, a retry to come due, the next refresh (when it is due,
   * so an operator's pause or seek is seen within the refresh interval), or, while a lane settled something not
   * yet committed, the next commit.
   */
  private async idle(signal: AbortSignal): Promise<void> {
    const moved = [...this.lanes.values()].some((l) => l.nextOffset > l.committed);
    const now = Date.now();
    const refreshDue = this.refreshedAt + this.deps.options.refreshIntervalMs - now;
    const wait = Math.min(refreshDue, moved ? COMMIT_INTERVAL_MS : Infinity, ...this.runner.dueRetries(now));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, Math.max(1, wait));
      signal.addEventListener('abort', done, { once: true });
      this.wake = done;
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
    });
    this.wake = () => undefined;
  }

  /**
   * Which lanes exist: one per active subscription this loop dispatches and partition of its topic. A lane of a
   * subscription no longer active here closes (what it settled is committed); a new one starts at the stored
   * offset, and parked copies of the events it will replay from Kafka are forgotten.
   */
  private async refresh(): Promise<void> {
    const scope = this.deps.scope;
    const active = (await this.deps.subscriptions.activeFor(this.deps.instanceId)).filter((s) => {
      if (scope && s.topic !== scope.topic) return false;
      if (this.deps.topics.isServed(s.topic)) return true;
      if (!this.ignoredTopics.has(s.topic)) {
        this.ignoredTopics.add(s.topic);
        this.log.error(
          { subscription: s.id, topic: s.topic },
          'subscription reads a topic this runtime does not serve; not dispatched',
        );
      }
      return false;
    });
    const activeIds = new Set(active.map((s) => s.id));
    const closed: Lane[] = [];
    for (const lane of [...this.lanes.values()]) {
      if (!activeIds.has(lane.subscription.id)) {
        this.lanes.close(lane);
        this.breakers.forget(lane.subscription.id);
        closed.push(lane);
        this.log.info(
          { subscription: lane.subscription.id, partition: lane.partition },
          'subscription no longer active here; lane closed',
        );
      }
    }
    // What a closed lane settled still counts (a disabled subscription may be enabled again).
    await this.committer.commit(closed);
    const missing: { subscription: SubscriptionEntity; partition: number }[] = [];
    for (const s of active) {
      for (const partition of scope ? [scope.partition] : await this.deps.topics.partitionsOf(s.topic)) {
        const lane = this.lanes.get(s.id, s.topic, partition);
        if (lane && (s.offsetsGeneration ?? 0) > lane.generation) {
          // An operator's seek moved the offsets since this lane started: it stops (its sends are aborted, what it
          // settled is not committed: the seek decided the position) and starts again from the new offsets below.
          this.lanes.close(lane);
          this.progress.seeksApplied = (this.progress.seeksApplied ?? 0) + 1;
          this.log.info(
            { subscription: s.id, topic: s.topic, partition, at: lane.nextOffset, generation: s.offsetsGeneration },
            'the offsets were moved by a seek; lane restarts from the new offsets',
          );
          missing.push({ subscription: s, partition });
        } else if (lane) {
          lane.subscription = s;
          lane.filter = this.filterOf(s);
        } else missing.push({ subscription: s, partition });
      }
    }
    if (missing.length > 0) {
      // Where the new lanes start, and forgetting the parked copies of what they will replay, in one fenced
      // transaction: no older run can have moved a position between the read and the forget.
      const ids = [...new Set(missing.map((m) => m.subscription.id))];
      const replayed = await this.fence.run(async (m) => {
        const stored = await this.deps.offsets.positionsOf(ids, m);
        const at = new Map(stored.map((p) => [`${p.subscriptionId}#${p.topic}#${p.partition}`, p.nextOffset]));
        // The generation read with the positions (one statement), else the subscription's: see offset-store.ts.
        const generations = new Map(stored.map((p) => [p.subscriptionId, p.generation ?? 0]));
        // A partition added to the topic after the subscription was created holds only newer events.
        const starts: Omit<OffsetPosition, 'epoch'>[] = missing.map(({ subscription, partition }) => ({
          subscriptionId: subscription.id,
          topic: subscription.topic,
          partition,
          nextOffset: at.get(`${subscription.id}#${subscription.topic}#${partition}`) ?? 0,
        }));
        await this.deps.retries.forgetReplayed(starts, m);
        // Dead-lettered after the last commit (the run crashed before it): settled, not to be delivered again.
        const dead = await this.deps.deadLetters.deadLetteredFrom(starts, m);
        return { starts, dead, generations };
      });
      const deadAt = new Map<string, number[]>();
      for (const d of replayed.dead) {
        const k = `${d.subscriptionId}#${d.topic}#${d.partition}`;
        const offsets = deadAt.get(k);
        if (offsets) offsets.push(d.offset);
        else deadAt.set(k, [d.offset]);
      }
      missing.forEach(({ subscription, partition }, i) => {
        const start = replayed.starts[i];
        const dead = deadAt.get(`${start.subscriptionId}#${start.topic}#${start.partition}`) ?? [];
        const generation = replayed.generations.get(subscription.id) ?? subscription.offsetsGeneration ?? 0;
        const lane = newLane(subscription, this.filterOf(subscription), partition, start.nextOffset, dead, generation);
        // Parked deliveries of an earlier run go before the events after them (ordered recovery, lane-runner.ts).
        lane.recovering = true;
        this.lanes.add(lane);
      });
      this.log.info(
        { lanes: missing.length, deadLetteredAhead: replayed.dead.length },
        'dispatching new subscription partitions',
      );
    }
    this.progress.subscriptions = activeIds.size;
    this.refreshedAt = Date.now();
  }

  /**
   * A subscription's compiled filters, compiled again only when the subscription changed; on the audit topic, a
   * tenant's subscription passes only that tenant's records (tenant-records.ts).
   */
  private filterOf(subscription: SubscriptionEntity): CompiledFilter {
    const version = subscription.updatedAt?.getTime() ?? 0;
    const cached = this.filters.get(subscription.id);
    if (cached && cached.version === version) return cached.filter;
    const own = compileFilters(subscription.filters, { maxAttributeChars: this.deps.options.filterMaxAttributeChars });
    const filter = ownRecordsOnly(subscription, own, this.deps.options.tenantRecords);
    this.filters.set(subscription.id, { version, filter });
    return filter;
  }

  /**
   * Waits for lanes that are mid-delivery to finish after their abort (an aborted send ends at once; a storage
   * write in flight completes), so no lane of this run still works when the next run starts.
   */
  private async settle(): Promise<void> {
    const deadline = Date.now() + SETTLE_LIMIT_MS;
    while (this.runner.busy() && Date.now() < deadline) await sleep(10);
  }
}

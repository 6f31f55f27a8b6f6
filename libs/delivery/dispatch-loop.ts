import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { CompiledFilter, compileFilters } from '../filter';
import { attributesOf, EventFrame, frameFromAttributes, frameFromKafkaRecord } from '../frame';
import type { FetchedPartition, FetchedRecord, PartitionPosition, PartitionReader, TopicAdmin } from '../kafka';
import { createLogger } from '../logging';
import { StaleEpochError, UNFENCED } from '../storage';
import type { DeadLetter, DeadLetterStore, OffsetPosition, OffsetStore, ParkedDelivery, RetryStore, SubscriptionEntity, WriteFence } from '../storage';
import type { WebhookResult, WebhookTarget } from './webhook-sender';

/** Delivers one event to a subscription's sink: its webhook, or its stream clients (libs/streams). */
export interface Deliverer {
  send(target: SubscriptionEntity & WebhookTarget, frame: EventFrame, messageId: string, signal?: AbortSignal): Promise<WebhookResult>;
}

export interface DispatchLoopOptions {
  /** How long one fetch may wait at the broker for new records. */
  pollMaxWaitMs: number;
  /** Most records buffered per subscription partition, waiting for delivery. */
  batchMaxEvents: number;
  /** How often the set of subscriptions (and the partitions of their topics) is re-read. */
  refreshIntervalMs: number;
  /** Defaults of the retry policy; a subscription's `config.retry` overrides each. */
  retryInitialMs: number;
  retryMaxMs: number;
  maxAttempts: number;
}

/** Attempts made in the lane, in partition order, before a failing delivery is parked in the retry table. */
const IN_LANE_ATTEMPTS = 3;
/** Parked deliveries attempted per sweep, and how often the sweep runs. */
const SWEEP_BATCH = 32;
const SWEEP_INTERVAL_MS = 1000;
/**
 * Offsets are committed at most this often while the loop runs (and always when it stops or a lane closes): one
 * statement for every lane that moved, whatever the rate. A crash redelivers at most this long of deliveries.
 */
const COMMIT_INTERVAL_MS = 200;
/** How often a loop with a gate checks it, to abort sends in flight when it shuts. */
const GATE_WATCH_MS = 100;
/** When nobody was there to deliver to (no stream client connected any more), how soon to look again. */
const NOT_ATTEMPTED_RETRY_MS = 100;
/**
 * Deliveries a lane has out at once. A webhook lane has one, so a partition's events reach the sink in order. A
 * stream lane has up to this many: the clients' windows do the flow control (libs/streams), and a round trip to
 * a client no longer bounds a partition's rate. Its offset still moves only over events that are settled.
 */
const STREAM_LANE_DEPTH = 32;

interface RetryPolicy {
  initialMs: number;
  maxMs: number;
  maxAttempts: number;
}

export interface DispatchLoopDeps {
  instanceId: string;
  subscriptions: {
    activeFor(instanceId: string): Promise<SubscriptionEntity[]>;
    disable(id: string, reason: string): Promise<void>;
  };
  offsets: OffsetStore;
  deadLetters: DeadLetterStore;
  retries: RetryStore;
  reader: PartitionReader;
  topics: TopicAdmin;
  sender: Deliverer;
  options: DispatchLoopOptions;
  /**
   * PARTITION_OWNED_PULL: the one partition this loop owns; every subscription of its topic is dispatched there.
   * Absent: every partition of the subscriptions `activeFor` returns (LOCAL_STICKY_PULL).
   */
  scope?: { topic: string; partition: number };
  /** Runs each write of the loop's state (commits, parking, dead letters); fenced by the owner's epoch when owned. */
  fence?: WriteFence;
  /** While this answers false the loop neither fetches nor starts deliveries (its lease is unconfirmed). */
  gate?: () => boolean;
}

/** A write refused because a newer owner holds the partition: the loop that made it must stop. */
export function isFenced(e: unknown): boolean {
  return e instanceof StaleEpochError || e instanceof FencedError;
}

/** What the loop reports; the activity sends it as its heartbeat details. */
export interface DispatchProgress {
  rounds: number;
  delivered: number;
  failedAttempts: number;
  parked: number;
  deadLettered: number;
  /** Events a subscription's filters passed over. */
  filteredOut: number;
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
  committedAt?: string;
}

/** Raised when Postgres refuses an offset commit: another owner holds the subscription partition now. */
export class FencedError extends Error {
  constructor(readonly rejected: { subscriptionId: string; topic: string; partition: number; reason: string }[]) {
    super(`offset commit rejected for ${rejected.length} subscription partition(s): ${rejected[0]?.reason}`);
    this.name = 'FencedError';
  }
}

/**
 * One subscription in one partition: its own cursor, buffer and retry state, so a slow or failing sink holds
 * back nothing but itself.
 */
interface Lane {
  subscription: SubscriptionEntity;
  /** The subscription's filters; an event they do not match is passed over, not delivered. */
  filter: CompiledFilter;
  topic: string;
  partition: number;
  /** The next offset to settle (deliver, or dead-letter). */
  nextOffset: number;
  /** What Postgres holds. */
  committed: number;
  /** Records from `nextOffset` on, in order; the settled ones leave once every record before them has settled. */
  buffer: LaneRecord[];
  busy: boolean;
  /** The lane starts nothing before this: a webhook lane's first record waits for its retry, or a storage write failed. */
  retryAt: number;
  abort: AbortController;
  /** The signal of this lane's sends: {@link DispatchLoop.sendSignalOf}. */
  send?: { gate: AbortController; signal: AbortSignal };
  highWatermark: number;
  /** While the lane is draining with deliveries out: wakes it to start records that arrived since. */
  nudge?: () => void;
}

/** A record in a lane, and where its delivery stands. */
interface LaneRecord {
  offset: number;
  frame?: EventFrame;
  error?: string;
  value: Buffer | null;
  /** Out to the sink now, or settled (acknowledged, passed over, parked or dead-lettered). */
  state?: 'sending' | 'settled';
  /** Failed attempts so far, the first failure, and when the next attempt may start. */
  attempts?: number;
  firstFailedAt?: Date;
  retryAt?: number;
}

const laneKey = (subscriptionId: string, topic: string, partition: number) => `${subscriptionId}#${topic}#${partition}`;

/**
 * The poll-and-dispatch loop of one instance in LOCAL_STICKY_PULL. Each round it fetches, for every partition its
 * subscriptions read, from the lowest offset a subscription still needs, hands the records to each subscription
 * partition (a lane), and commits in one statement every lane that moved. Lanes deliver on their own: a failed
 * attempt schedules a retry with exponential backoff and jitter, and the lane waits while the others go on.
 * An offset moves past an event only after the sink acknowledged it (or it was dead-lettered), so a crash
 * redelivers and never skips.
 *
 * A failing delivery is retried in its lane three times, then parked in the retry table (the lane moves on) and
 * attempted by a sweep, and dead-lettered after its subscription's last attempt (docs/delivery.md). A webhook
 * lane has one delivery out at a time and retries it before the next; a stream lane has up to
 * {@link STREAM_LANE_DEPTH} out, and the others go on while one waits for its retry.
 */
export class DispatchLoop {
  private readonly log = createLogger('DispatchLoop');
  private readonly lanes = new Map<string, Lane>();
  private readonly progress: DispatchProgress = {
    rounds: 0,
    delivered: 0,
    failedAttempts: 0,
    parked: 0,
    deadLettered: 0,
    filteredOut: 0,
    subscriptions: 0,
    partitions: 0,
    lag: 0,
    gatedRounds: 0,
  };
  private readonly fence: WriteFence;
  private committedAt = 0;
  /** Aborted while the gate is shut: sends in flight stop at once, so none outlives the owner's lease window. */
  private gateClosed = new AbortController();
  /** Set when a write was refused for a stale epoch; the run ends with it. */
  private fencedBy?: Error;
  private refreshedAt = -Infinity;
  private sweptAt = 0;
  /** Aborted when the run ends: sweep attempts in flight give up (their deliveries stay parked). */
  private stopping?: AbortController;
  private sweeping?: Promise<void>;
  private readonly ignoredTopics = new Set<string>();
  private readonly filters = new Map<string, { version: number; filter: CompiledFilter }>();
  /** Wakes the loop when a lane finishes or a retry comes due. */
  private wake: () => void = () => undefined;
  /** When the loop last completed a round; the activity's heartbeat watchdog reads it. */
  lastRoundAt = Date.now();

  constructor(private readonly deps: DispatchLoopDeps) {
    this.fence = deps.fence ?? UNFENCED;
  }

  private gateOpen(): boolean {
    return !this.fencedBy && (this.deps.gate?.() ?? true);
  }

  /** Aborted when the lane closes or the gate shuts; built once per lane and gate period, not per send. */
  private sendSignalOf(lane: Lane): AbortSignal {
    if (!lane.send || lane.send.gate !== this.gateClosed) {
      lane.send = { gate: this.gateClosed, signal: AbortSignal.any([lane.abort.signal, this.gateClosed.signal]) };
      // Every delivery out in the lane listens on it (a stream lane has up to STREAM_LANE_DEPTH).
      setMaxListeners(2 * STREAM_LANE_DEPTH + 10, lane.send.signal);
    }
    return lane.send.signal;
  }

  /** Aborts the sends in flight when the gate shuts; a fresh signal when it opens again. */
  private watchGate(): void {
    const open = this.gateOpen();
    if (!open && !this.gateClosed.signal.aborted) this.gateClosed.abort();
    else if (open && this.gateClosed.signal.aborted) this.gateClosed = new AbortController();
  }

  /** A stale-epoch refusal stops every lane; other errors are the caller's. */
  private noteFenced(e: unknown): boolean {
    if (!isFenced(e)) return false;
    if (!this.fencedBy) {
      this.fencedBy = e as Error;
      this.log.warn({ error: (e as Error).message }, 'a write was refused for a stale epoch; this loop stops');
      for (const lane of this.lanes.values()) lane.abort.abort();
      this.wake();
    }
    return true;
  }

  get snapshot(): DispatchProgress {
    return { ...this.progress };
  }

  /** Runs until `stopSignal` aborts or `deadline` (epoch ms) passes; commits what was settled before it returns. */
  async run(stopSignal: AbortSignal, deadline: number, report: (p: DispatchProgress) => void): Promise<DispatchProgress> {
    const signal = AbortSignal.any([stopSignal, AbortSignal.timeout(Math.max(0, deadline - Date.now()))]);
    // Every run starts from what Postgres holds.
    this.lanes.clear();
    this.stopping = new AbortController();
    this.refreshedAt = -Infinity;
    const watchGate = this.deps.gate ? setInterval(() => this.watchGate(), GATE_WATCH_MS) : undefined;
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
        const positions = this.wanted();
        if (positions.length > 0) await this.accept(await this.fetch(positions, signal));
        this.kick();
        this.sweep();
        if (Date.now() - this.committedAt >= COMMIT_INTERVAL_MS) {
          this.committedAt = Date.now();
          await this.commit();
        }
        this.progress.rounds++;
        this.lastRoundAt = Date.now();
        this.measure();
        report(this.snapshot);
        if (positions.length === 0) await this.idle(signal);
      }
    } catch (e) {
      if (!this.noteFenced(e)) throw e;
    } finally {
      clearInterval(watchGate);
      for (const lane of this.lanes.values()) lane.abort.abort();
      this.stopping.abort();
      await this.settle();
      await this.sweeping;
      if (!this.fencedBy) await this.commit().catch((e: unknown) => { if (!this.noteFenced(e)) throw e; });
    }
    if (this.fencedBy) throw this.fencedBy;
    return this.snapshot;
  }

  private async fetch(positions: PartitionPosition[], signal: AbortSignal): Promise<FetchedPartition[]> {
    try {
      return await this.deps.reader.fetch(positions, { maxWaitMs: this.deps.options.pollMaxWaitMs });
    } catch (e) {
      this.log.warn({ error: (e as Error).message }, 'fetch failed; backing off');
      await pause(this.deps.options.pollMaxWaitMs, signal);
      return [];
    }
  }

  /** Nothing to fetch: wait for a lane to finish, a retry to come due, or the next refresh. */
  private async idle(signal: AbortSignal): Promise<void> {
    const now = Date.now();
    const dueRetries: number[] = [];
    for (const lane of this.lanes.values()) {
      if (lane.retryAt > now) dueRetries.push(lane.retryAt - now);
      for (const r of lane.buffer) if (r.state === undefined && (r.retryAt ?? 0) > now) dueRetries.push(r.retryAt! - now);
    }
    const wait = Math.min(this.deps.options.refreshIntervalMs, ...dueRetries);
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

  private async refresh(): Promise<void> {
    const scope = this.deps.scope;
    const active = (await this.deps.subscriptions.activeFor(this.deps.instanceId)).filter((s) => {
      if (scope && s.topic !== scope.topic) return false;
      if (this.deps.topics.isServed(s.topic)) return true;
      if (!this.ignoredTopics.has(s.topic)) {
        this.ignoredTopics.add(s.topic);
        this.log.error({ subscription: s.id, topic: s.topic }, 'subscription reads a topic this runtime does not serve; not dispatched');
      }
      return false;
    });
    const activeIds = new Set(active.map((s) => s.id));
    const closed: Lane[] = [];
    for (const [key, lane] of this.lanes) {
      if (!activeIds.has(lane.subscription.id)) {
        lane.abort.abort();
        this.lanes.delete(key);
        closed.push(lane);
        this.log.info({ subscription: lane.subscription.id, partition: lane.partition }, 'subscription no longer active here; lane closed');
      }
    }
    // What a closed lane settled still counts (a disabled subscription may be enabled again).
    await this.commit(closed);
    const missing: { subscription: SubscriptionEntity; partition: number }[] = [];
    for (const s of active) {
      for (const partition of scope ? [scope.partition] : await this.deps.topics.partitionsOf(s.topic)) {
        const lane = this.lanes.get(laneKey(s.id, s.topic, partition));
        if (lane) {
          lane.subscription = s;
          lane.filter = this.filterOf(s);
        } else missing.push({ subscription: s, partition });
      }
    }
    if (missing.length > 0) {
      const stored = await this.deps.offsets.positionsOf([...new Set(missing.map((m) => m.subscription.id))]);
      const at = new Map(stored.map((p) => [laneKey(p.subscriptionId, p.topic, p.partition), p.nextOffset]));
      for (const { subscription, partition } of missing) {
        const key = laneKey(subscription.id, subscription.topic, partition);
        // A partition added to the topic after the subscription was created holds only newer events.
        const nextOffset = at.get(key) ?? 0;
        this.lanes.set(key, {
          subscription,
          filter: this.filterOf(subscription),
          topic: subscription.topic,
          partition,
          nextOffset,
          committed: nextOffset,
          buffer: [],
          busy: false,
          retryAt: 0,
          abort: new AbortController(),
          highWatermark: nextOffset,
        });
      }
      const replayed = missing.map(({ subscription, partition }) => ({
        subscriptionId: subscription.id,
        topic: subscription.topic,
        partition,
        nextOffset: at.get(laneKey(subscription.id, subscription.topic, partition)) ?? 0,
      }));
      await this.fence.run((m) => this.deps.retries.forgetReplayed(replayed, m));
      this.log.info({ lanes: missing.length }, 'dispatching new subscription partitions');
    }
    this.progress.subscriptions = activeIds.size;
    this.refreshedAt = Date.now();
  }

  /** A subscription's compiled filters, compiled again only when the subscription changed. */
  private filterOf(subscription: SubscriptionEntity): CompiledFilter {
    const version = subscription.updatedAt?.getTime() ?? 0;
    const cached = this.filters.get(subscription.id);
    if (cached && cached.version === version) return cached.filter;
    const filter = compileFilters(subscription.filters);
    this.filters.set(subscription.id, { version, filter });
    return filter;
  }

  /** The offset each partition must be fetched from: the lowest any lane with room in its buffer still lacks. */
  private wanted(): PartitionPosition[] {
    const lowest = new Map<string, PartitionPosition>();
    for (const lane of this.lanes.values()) {
      if (lane.buffer.length >= this.deps.options.batchMaxEvents) continue;
      const from = lane.buffer.length > 0 ? lane.buffer[lane.buffer.length - 1].offset + 1 : lane.nextOffset;
      const k = `${lane.topic}#${lane.partition}`;
      const seen = lowest.get(k);
      if (!seen || from < seen.offset) lowest.set(k, { topic: lane.topic, partition: lane.partition, offset: from });
    }
    this.progress.partitions = new Set([...this.lanes.values()].map((l) => `${l.topic}#${l.partition}`)).size;
    return [...lowest.values()];
  }

  /** Hands fetched records to the lanes that still lack them. */
  private async accept(fetched: FetchedPartition[]): Promise<void> {
    for (const part of fetched) {
      if (part.outOfRange) {
        await this.realign(part.topic, part.partition);
        continue;
      }
      const decoded = part.records.map((r) => this.decode(r));
      for (const lane of this.lanes.values()) {
        if (lane.topic !== part.topic || lane.partition !== part.partition) continue;
        lane.highWatermark = part.highWatermark;
        const from = lane.buffer.length > 0 ? lane.buffer[lane.buffer.length - 1].offset + 1 : lane.nextOffset;
        // A fetch that started past what this lane still lacks (it was full when the fetch was planned, and
        // drained since) has a gap for it: taking these records would skip the events in between.
        if (part.fetchOffset > from) continue;
        for (const record of decoded) {
          if (record.offset < from) continue;
          if (lane.buffer.length >= this.deps.options.batchMaxEvents) break;
          // Each lane its own copy: where a delivery stands is the lane's (the decoded event is shared).
          lane.buffer.push({ ...record });
        }
        lane.nudge?.();
      }
    }
  }

  private decode(record: FetchedRecord): LaneRecord {
    try {
      return { offset: record.offset, frame: frameFromKafkaRecord(record.headers, record.value), value: record.value };
    } catch (e) {
      return { offset: record.offset, error: (e as Error).message, value: record.value };
    }
  }

  /** Starts every idle lane that has records and no retry pending. */
  private kick(): void {
    const now = Date.now();
    for (const lane of this.lanes.values()) {
      if (lane.busy || lane.buffer.length === 0 || lane.retryAt > now || lane.abort.signal.aborted) continue;
      lane.busy = true;
      void this.drain(lane)
        .catch((e: unknown) => this.laneFailed(lane, e))
        .finally(() => {
          lane.busy = false;
          this.wake();
        });
    }
  }

  /**
   * A lane's own storage write failed (parking, dead-lettering). If the subscription is gone (its row was
   * deleted under us), the lane closes; otherwise it waits and tries the same event again. Nothing moved.
   */
  private laneFailed(lane: Lane, e: unknown): void {
    if (this.noteFenced(e)) return;
    const key = laneKey(lane.subscription.id, lane.topic, lane.partition);
    if ((e as { driverError?: { code?: string }; code?: string }).driverError?.code === '23503') {
      lane.abort.abort();
      this.lanes.delete(key);
      this.log.info({ subscription: lane.subscription.id, partition: lane.partition }, 'subscription deleted during delivery; lane closed');
      return;
    }
    lane.retryAt = Date.now() + this.deps.options.retryMaxMs;
    this.log.error({ subscription: lane.subscription.id, topic: lane.topic, partition: lane.partition, offset: lane.nextOffset, error: (e as Error).message },
      'could not record a failed delivery; trying the event again later');
  }

  /**
   * Delivers a lane's buffer, up to the lane's depth at once (one for a webhook, so in order), until nothing is
   * left to start: the buffer is settled, its records wait for their retries, or the lane halted (closed, gate
   * shut, nobody to deliver to, the subscription disabled). The offset moves over the settled records at the
   * front. A webhook lane starts nothing past a record that waits for its retry; a stream lane does.
   */
  private async drain(lane: Lane): Promise<void> {
    const depth = lane.subscription.protocol === 'STREAM' ? STREAM_LANE_DEPTH : 1;
    const out = new Set<Promise<void>>();
    let halted = false;
    let failure: unknown;
    for (;;) {
      while (lane.buffer.length > 0 && lane.buffer[0].state === 'settled') lane.nextOffset = lane.buffer.shift()!.offset + 1;
      if (!halted && !lane.abort.signal.aborted && this.gateOpen()) {
        const now = Date.now();
        for (const record of lane.buffer) {
          if (out.size >= depth) break;
          if (record.state !== undefined) continue;
          if ((record.retryAt ?? 0) > now) {
            if (depth === 1) break;
            continue;
          }
          record.state = 'sending';
          const delivery: Promise<void> = this.deliver(lane, record)
            .then(
              (outcome) => {
                record.state = outcome === 'settled' ? 'settled' : undefined;
                halted ||= outcome === 'halt';
              },
              (e: unknown) => {
                record.state = undefined;
                halted = true;
                failure ??= e;
              },
            )
            .finally(() => out.delete(delivery));
          out.add(delivery);
        }
      }
      if (out.size === 0) break;
      if (out.size >= depth) {
        await Promise.race(out);
      } else {
        // A delivery ends, or records arrive (accept); either may let the lane start more.
        await Promise.race([...out, new Promise<void>((resolve) => (lane.nudge = resolve))]);
        lane.nudge = undefined;
      }
    }
    // A webhook lane waits for its first record's retry; a stream lane is started again each round and starts
    // each waiting record when it is due.
    const head = lane.buffer.find((r) => r.state !== 'settled');
    lane.retryAt = depth === 1 && head !== undefined && head.state === undefined ? (head.retryAt ?? 0) : 0;
    if (failure !== undefined) throw failure;
  }

  /**
   * One record of a lane to its sink: `settled` (acknowledged, passed over, parked or dead-lettered), `retry` (it
   * waits for its next attempt in the lane), or `halt`: the send was aborted, nobody was there to take it, or the
   * subscription was disabled, and the lane starts nothing more for now.
   */
  private async deliver(lane: Lane, record: LaneRecord): Promise<'settled' | 'retry' | 'halt'> {
    if (!record.frame) {
      await this.deadLetterUnreadable(lane, record);
      return 'settled';
    }
    if (!lane.filter.matches(record.frame)) {
      this.progress.filteredOut++;
      return 'settled';
    }
    const messageId = `${lane.subscription.id}:${lane.topic}:${lane.partition}:${record.offset}`;
    const signal = this.sendSignalOf(lane);
    const result = await this.deps.sender.send(lane.subscription, record.frame, messageId, signal);
    // Closed, or the gate shut mid-send: the answer does not count.
    if (signal.aborted) return 'halt';
    if (result.gone) {
      await this.disable(lane.subscription, `the sink answered 410 Gone for offset ${record.offset}`);
      return 'halt';
    }
    if (result.notAttempted) {
      record.retryAt = Date.now() + NOT_ATTEMPTED_RETRY_MS;
      return 'halt';
    }
    if (!result.ok) {
      // A receiver's reject is a failure with no attempt left: the same path, straight to the dead-letter queue.
      const moved = await this.failed(lane, record, record.frame, result.error ?? 'failed', result.retryAfterMs, result.rejected);
      return moved ? 'settled' : 'retry';
    }
    this.progress.delivered++;
    return 'settled';
  }

  /** A sink that answered 410 wants nothing more: the subscription is disabled and its lanes close. */
  private async disable(subscription: SubscriptionEntity, reason: string): Promise<void> {
    await this.deps.subscriptions.disable(subscription.id, reason);
    for (const [key, lane] of this.lanes) {
      if (lane.subscription.id !== subscription.id) continue;
      lane.abort.abort();
      this.lanes.delete(key);
    }
    this.log.warn({ subscription: subscription.id, sink: subscription.sink, reason }, 'subscription disabled');
  }

  /**
   * After a failed attempt in the lane: retry in the lane (exponential backoff with jitter, or later if the sink
   * asked with Retry-After) for the first few attempts; after that, park the delivery in the retry table so the
   * lane moves on; after the subscription's last attempt, dead-letter it. Parking and dead-lettering are durable
   * before this returns true (the lane may move past the event).
   */
  private async failed(lane: Lane, record: LaneRecord, frame: EventFrame, error: string, retryAfterMs?: number, final = false): Promise<boolean> {
    const policy = this.policyOf(lane.subscription);
    const offset = record.offset;
    const attempts = (record.attempts = (record.attempts ?? 0) + 1);
    const firstFailedAt = (record.firstFailedAt ??= new Date());
    this.progress.failedAttempts++;
    const delay = Math.max(backoff(policy, attempts), retryAfterMs ?? 0);
    const where = { subscription: lane.subscription.id, topic: lane.topic, partition: lane.partition, offset, eventId: frame.id, attempt: attempts, error };
    if (final || attempts >= policy.maxAttempts) {
      const letter = this.letter(lane, offset, frame, attempts, error, firstFailedAt);
      await this.fence.run((m) => this.deps.deadLetters.add([letter], m));
      this.progress.deadLettered++;
      this.log.error(where, 'delivery failed for the last time; moved to the dead-letter queue');
      return true;
    }
    if (attempts >= IN_LANE_ATTEMPTS) {
      const parked: ParkedDelivery = {
        subscriptionId: lane.subscription.id,
        topic: lane.topic,
        partition: lane.partition,
        offset,
        attributes: attributesOf(frame),
        data: frame.data ?? null,
        attempts,
        lastError: error,
        firstFailedAt,
        nextAttemptAt: new Date(Date.now() + delay),
        epoch: this.fence.epoch,
      };
      await this.fence.run((m) => this.deps.retries.park(parked, m));
      this.progress.parked++;
      this.log.warn({ ...where, retryInMs: Math.round(delay) }, 'delivery failed; parked for a later attempt');
      return true;
    }
    record.retryAt = Date.now() + delay;
    this.log.warn({ ...where, retryInMs: Math.round(delay) }, 'delivery failed; retrying');
    return false;
  }

  private policyOf(subscription: SubscriptionEntity): RetryPolicy {
    const own = (subscription.config?.retry ?? {}) as Partial<{ maxAttempts: number; initialDelayMs: number; maxDelayMs: number }>;
    return {
      initialMs: own.initialDelayMs ?? this.deps.options.retryInitialMs,
      maxMs: own.maxDelayMs ?? this.deps.options.retryMaxMs,
      maxAttempts: own.maxAttempts ?? this.deps.options.maxAttempts,
    };
  }

  /** A dead letter for a subscription partition's offset: the event, or the raw bytes of a record that is none. */
  private letter(
    at: { subscription?: SubscriptionEntity; subscriptionId?: string; topic: string; partition: number },
    offset: number,
    event: EventFrame | { raw: Buffer | null },
    attempts: number,
    lastError: string,
    firstFailedAt: Date,
  ): DeadLetter {
    const isFrame = !('raw' in event);
    return {
      subscriptionId: at.subscription?.id ?? at.subscriptionId!,
      topic: at.topic,
      partition: at.partition,
      offset,
      eventId: isFrame ? event.id : '',
      attributes: isFrame ? attributesOf(event) : {},
      data: isFrame ? (event.data ?? null) : event.raw,
      attempts,
      lastError,
      firstFailedAt,
      lastFailedAt: new Date(),
    };
  }

  /** Attempts the parked deliveries that are due, in the background of the loop (at most one sweep at a time). */
  private sweep(): void {
    if (this.sweeping || Date.now() - this.sweptAt < SWEEP_INTERVAL_MS || !this.gateOpen()) return;
    this.sweptAt = Date.now();
    const subscriptions = new Map([...this.lanes.values()].map((l) => [l.subscription.id, l.subscription]));
    this.sweeping = this.deps.retries
      .due([...subscriptions.keys()], SWEEP_BATCH, undefined, this.deps.scope)
      .then((due) => {
        // One signal for the sweep's sends: the run ends, or the gate shuts.
        const signal = AbortSignal.any([this.stopping!.signal, this.gateClosed.signal]);
        return Promise.allSettled(due.map((d) => this.retryParked(d, subscriptions.get(d.subscriptionId)!, signal)));
      })
      .then((results) => {
        const failed = results.filter((r) => r.status === 'rejected' && !this.noteFenced(r.reason));
        if (failed.length > 0) {
          this.log.warn({ failed: failed.length, error: String((failed[0] as PromiseRejectedResult).reason) }, 'some parked deliveries could not be recorded; they stay parked');
        }
      })
      .catch((e: unknown) => this.log.warn({ error: (e as Error).message }, 'retry sweep failed; next sweep tries again'))
      .finally(() => (this.sweeping = undefined));
  }

  private async retryParked(parked: ParkedDelivery, subscription: SubscriptionEntity, signal: AbortSignal): Promise<void> {
    if (!this.gateOpen()) return;
    const frame = frameFromAttributes(parked.attributes, parked.data);
    const messageId = `${parked.subscriptionId}:${parked.topic}:${parked.partition}:${parked.offset}`;
    const result = await this.deps.sender.send(subscription, frame, messageId, signal);
    if (signal.aborted) return;
    if (result.ok) {
      await this.fence.run((m) => this.deps.retries.delivered(parked, m));
      this.progress.delivered++;
      return;
    }
    if (result.gone) {
      await this.disable(subscription, `the sink answered 410 Gone for offset ${parked.offset}`);
      return;
    }
    if (result.notAttempted) return;
    const policy = this.policyOf(subscription);
    const attempts = parked.attempts + 1;
    const error = result.error ?? 'failed';
    this.progress.failedAttempts++;
    if (attempts >= policy.maxAttempts || result.rejected) {
      const letter = this.letter(parked, parked.offset, frame, attempts, error, parked.firstFailedAt);
      await this.fence.run((m) => this.deps.retries.deadLetter(letter, m));
      this.progress.deadLettered++;
      this.log.error({ subscription: parked.subscriptionId, topic: parked.topic, partition: parked.partition, offset: parked.offset, eventId: frame.id, attempts, error },
        'parked delivery failed for the last time; moved to the dead-letter queue');
      return;
    }
    const delay = Math.max(backoff(policy, attempts), result.retryAfterMs ?? 0);
    await this.fence.run((m) => this.deps.retries.reschedule(parked, attempts, new Date(Date.now() + delay), error, m));
  }

  /** A record that is not a CloudEvent is kept in the dead-letter queue before the lane moves past it. */
  private async deadLetterUnreadable(lane: Lane, record: LaneRecord): Promise<void> {
    const letter = this.letter(lane, record.offset, { raw: record.value }, 0, `not a CloudEvent: ${record.error}`, new Date());
    await this.fence.run((m) => this.deps.deadLetters.add([letter], m));
    this.progress.deadLettered++;
    this.log.error(
      { subscription: lane.subscription.id, topic: lane.topic, partition: lane.partition, offset: record.offset, error: record.error },
      'record is not a CloudEvent; moved to the dead-letter queue',
    );
  }

  /** The wanted offset is outside the log: before its start (retention) or past its end (a recreated topic). */
  private async realign(topic: string, partition: number): Promise<void> {
    const [starts, ends] = await Promise.all([this.deps.topics.startOffsets(topic), this.deps.topics.endOffsets(topic)]);
    const start = starts.get(partition) ?? 0;
    const end = ends.get(partition) ?? 0;
    for (const lane of this.lanes.values()) {
      if (lane.topic !== topic || lane.partition !== partition || lane.busy) continue;
      const target = lane.nextOffset < start ? start : lane.nextOffset > end ? end : lane.nextOffset;
      if (target === lane.nextOffset) continue;
      this.log.error(
        { subscription: lane.subscription.id, topic, partition, from: lane.nextOffset, to: target, logStart: start, logEnd: end },
        lane.nextOffset < start
          ? 'events were deleted by Kafka retention before delivery; resuming at the first stored offset'
          : 'the stored offset is past the end of the log (was the topic recreated?); resuming at its end',
      );
      lane.buffer = [];
      if (target < lane.committed) {
        // The log itself went backwards: the stored offset points at events that no longer exist.
        const position = { subscriptionId: lane.subscription.id, topic, partition, nextOffset: target, epoch: this.fence.epoch };
        await this.fence.run(async (m) => {
          await this.deps.offsets.rewind(position, m);
          // Parked deliveries at those offsets belong to the old log; new events will take their offsets.
          await this.deps.retries.forgetFrom(lane.subscription.id, topic, partition, target, m);
        });
        lane.committed = target;
      }
      lane.nextOffset = target;
    }
  }

  /**
   * Waits for lanes that are mid-delivery to finish after their abort (an aborted send ends at once; a storage
   * write in flight completes), so no lane of this run still works when the next run starts.
   */
  private async settle(): Promise<void> {
    const deadline = Date.now() + 15000;
    while ([...this.lanes.values()].some((l) => l.busy) && Date.now() < deadline) await sleep(10);
  }

  /** One statement for every lane (of `lanes`, else all) that moved since the last commit. */
  private async commit(lanes: Iterable<Lane> = this.lanes.values()): Promise<void> {
    const moved = [...lanes].filter((l) => l.nextOffset > l.committed);
    if (moved.length === 0) return;
    const positions: OffsetPosition[] = moved.map((l) => ({
      subscriptionId: l.subscription.id,
      topic: l.topic,
      partition: l.partition,
      nextOffset: l.nextOffset,
      epoch: this.fence.epoch,
    }));
    const results = await this.fence.run((m) => this.deps.offsets.commit(positions, m));
    const fenced: FencedError['rejected'] = [];
    results.forEach((r, i) => {
      const lane = moved[i];
      if (r.applied) lane.committed = r.position.nextOffset;
      else if (r.rejected === 'SUBSCRIPTION_GONE') {
        lane.abort.abort();
        this.lanes.delete(laneKey(lane.subscription.id, lane.topic, lane.partition));
      } else fenced.push({ subscriptionId: lane.subscription.id, topic: lane.topic, partition: lane.partition, reason: r.rejected! });
    });
    this.progress.committedAt = new Date().toISOString();
    if (fenced.length > 0) throw new FencedError(fenced);
  }

  private measure(): void {
    let lag = 0;
    let committed: number | undefined;
    let high: number | undefined;
    for (const lane of this.lanes.values()) {
      lag += Math.max(0, lane.highWatermark - lane.nextOffset);
      committed = committed === undefined ? lane.committed : Math.min(committed, lane.committed);
      high = high === undefined ? lane.highWatermark : Math.max(high, lane.highWatermark);
    }
    this.progress.lag = lag;
    this.progress.committedOffset = committed;
    this.progress.highWatermark = high;
  }
}

/** The delay before attempt `attempts + 1`: exponential, capped, with jitter (uniform in [d/2, d]). */
function backoff(policy: RetryPolicy, attempts: number): number {
  const ceiling = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(attempts - 1, 30));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

async function pause(ms: number, signal: AbortSignal): Promise<void> {
  try {
    await sleep(ms, undefined, { signal });
  } catch {
    /* aborted: the caller checks the signal */
  }
}

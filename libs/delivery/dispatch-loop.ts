import { setTimeout as sleep } from 'node:timers/promises';
import { EventFrame, frameFromKafkaRecord } from '../frame';
import type { FetchedPartition, FetchedRecord, PartitionPosition, PartitionReader, TopicAdmin } from '../kafka';
import { createLogger } from '../logging';
import type { OffsetPosition, OffsetStore, SubscriptionEntity } from '../storage';
import type { WebhookSender } from './webhook-sender';

export interface DispatchLoopOptions {
  /** How long one fetch may wait at the broker for new records. */
  pollMaxWaitMs: number;
  /** Most records of one partition dispatched between two offset commits. */
  batchMaxEvents: number;
  /** How often the set of subscriptions is re-read from Postgres. */
  refreshIntervalMs: number;
  retryInitialMs: number;
  retryMaxMs: number;
}

export interface DispatchLoopDeps {
  instanceId: string;
  subscriptions: { activeFor(instanceId: string): Promise<SubscriptionEntity[]> };
  offsets: OffsetStore;
  reader: PartitionReader;
  topics: TopicAdmin;
  sender: WebhookSender;
  options: DispatchLoopOptions;
}

/** What the loop reports after each round; the activity sends it as its heartbeat details. */
export interface DispatchProgress {
  rounds: number;
  delivered: number;
  failedAttempts: number;
  subscriptions: number;
  partitions: number;
  /** Events in Kafka not yet settled, summed over every subscription partition. */
  lag: number;
  committedAt?: string;
}

/** Raised when Postgres refuses an offset commit: another owner holds the subscription partition now. */
export class FencedError extends Error {
  constructor(readonly rejected: { subscriptionId: string; topic: string; partition: number; reason: string }[]) {
    super(`offset commit rejected for ${rejected.length} subscription partition(s): ${rejected[0]?.reason}`);
    this.name = 'FencedError';
  }
}

interface Cursor {
  subscriptionId: string;
  topic: string;
  partition: number;
  nextOffset: number;
  committed: number;
}

const partitionKey = (topic: string, partition: number) => `${topic}#${partition}`;

/**
 * The poll-and-dispatch loop of one instance in LOCAL_STICKY_PULL: it reads every partition of the topics its
 * own subscriptions read, from the lowest offset any of them has not settled, delivers each event to each
 * subscription in partition order, and commits the new positions to Postgres once per round, after the webhooks
 * answered. A crash between delivery and commit redelivers; nothing is skipped.
 *
 * First slice: a failed delivery is retried in place with exponential backoff and jitter until it succeeds or
 * the loop stops, which holds back that subscription's partition. The retry table and the dead-letter queue
 * that release it come with the reliability work (docs/delivery.md).
 */
export class DispatchLoop {
  private readonly log = createLogger('DispatchLoop');
  private readonly subscriptions = new Map<string, SubscriptionEntity>();
  /** subscription id -> partition key -> cursor */
  private readonly cursors = new Map<string, Map<string, Cursor>>();
  private readonly progress: DispatchProgress = {
    rounds: 0,
    delivered: 0,
    failedAttempts: 0,
    subscriptions: 0,
    partitions: 0,
    lag: 0,
  };
  private refreshedAt = -Infinity;
  private report: (p: DispatchProgress) => void = () => undefined;

  constructor(private readonly deps: DispatchLoopDeps) {}

  /**
   * Runs until `stopSignal` aborts or `deadline` (epoch ms) passes. Reports after every round and after every
   * failed delivery attempt, so a sink that keeps failing does not silence the heartbeat.
   */
  async run(stopSignal: AbortSignal, deadline: number, report: (p: DispatchProgress) => void): Promise<DispatchProgress> {
    const signal = AbortSignal.any([stopSignal, AbortSignal.timeout(Math.max(0, deadline - Date.now()))]);
    this.report = (p) => report(p);
    while (!signal.aborted) {
      if (Date.now() - this.refreshedAt >= this.deps.options.refreshIntervalMs) await this.refresh();
      const positions = this.positions();
      if (positions.length === 0) {
        report({ ...this.progress });
        await pause(this.deps.options.refreshIntervalMs, signal);
        continue;
      }
      const fetched = await this.deps.reader.fetch(positions, { maxWaitMs: this.deps.options.pollMaxWaitMs });
      await this.dispatch(fetched, signal);
      await this.commit();
      this.progress.rounds++;
      this.progress.lag = this.lag(fetched);
      report({ ...this.progress });
    }
    await this.commit();
    return { ...this.progress };
  }

  private async refresh(): Promise<void> {
    const active = await this.deps.subscriptions.activeFor(this.deps.instanceId);
    const activeIds = new Set(active.map((s) => s.id));
    for (const id of [...this.subscriptions.keys()]) {
      if (!activeIds.has(id)) {
        this.subscriptions.delete(id);
        this.cursors.delete(id);
        this.log.info({ subscription: id }, 'subscription no longer active here; stopped dispatching it');
      }
    }
    const added = active.filter((s) => !this.subscriptions.has(s.id));
    for (const s of active) this.subscriptions.set(s.id, s);
    if (added.length > 0) {
      const stored = await this.deps.offsets.positionsOf(added.map((s) => s.id));
      for (const s of added) {
        const cursors = new Map<string, Cursor>();
        for (const partition of await this.deps.topics.partitionsOf(s.topic)) {
          const p = stored.find((o) => o.subscriptionId === s.id && o.topic === s.topic && o.partition === partition);
          // A partition added to the topic after the subscription was created holds only newer events.
          const nextOffset = p?.nextOffset ?? 0;
          cursors.set(partitionKey(s.topic, partition), {
            subscriptionId: s.id,
            topic: s.topic,
            partition,
            nextOffset,
            committed: nextOffset,
          });
        }
        this.cursors.set(s.id, cursors);
        this.log.info({ subscription: s.id, topic: s.topic, sink: s.sink }, 'dispatching subscription');
      }
    }
    this.progress.subscriptions = this.subscriptions.size;
    this.refreshedAt = Date.now();
  }

  /** For each partition any subscription reads, the lowest offset one of them still needs. */
  private positions(): PartitionPosition[] {
    const lowest = new Map<string, PartitionPosition>();
    for (const cursors of this.cursors.values()) {
      for (const c of cursors.values()) {
        const k = partitionKey(c.topic, c.partition);
        const seen = lowest.get(k);
        if (!seen || c.nextOffset < seen.offset) lowest.set(k, { topic: c.topic, partition: c.partition, offset: c.nextOffset });
      }
    }
    this.progress.partitions = lowest.size;
    return [...lowest.values()];
  }

  private async dispatch(fetched: FetchedPartition[], signal: AbortSignal): Promise<void> {
    const work: Promise<void>[] = [];
    for (const part of fetched) {
      const k = partitionKey(part.topic, part.partition);
      if (part.outOfRange) {
        await this.skipDeleted(part);
        continue;
      }
      const records = part.records.slice(0, this.deps.options.batchMaxEvents);
      if (records.length === 0) continue;
      const frames = records.map((r) => this.decode(part, r));
      for (const [id, cursors] of this.cursors) {
        const cursor = cursors.get(k);
        const subscription = this.subscriptions.get(id);
        if (cursor && subscription) work.push(this.deliverInOrder(subscription, cursor, records, frames, signal));
      }
    }
    await Promise.all(work);
  }

  private decode(part: FetchedPartition, record: FetchedRecord): EventFrame | undefined {
    try {
      return frameFromKafkaRecord(record.headers, record.value);
    } catch (e) {
      this.log.error(
        { topic: part.topic, partition: part.partition, offset: record.offset, error: (e as Error).message },
        'record is not a CloudEvent; skipped',
      );
      return undefined;
    }
  }

  private async deliverInOrder(
    subscription: SubscriptionEntity,
    cursor: Cursor,
    records: FetchedRecord[],
    frames: (EventFrame | undefined)[],
    signal: AbortSignal,
  ): Promise<void> {
    for (let i = 0; i < records.length; i++) {
      const offset = records[i].offset;
      if (offset < cursor.nextOffset) continue;
      const frame = frames[i];
      if (frame && !(await this.deliverWithRetry(subscription, cursor, offset, frame, signal))) return;
      cursor.nextOffset = offset + 1;
    }
  }

  /** True once the sink acknowledged; false when the loop was stopped first. */
  private async deliverWithRetry(
    subscription: SubscriptionEntity,
    cursor: Cursor,
    offset: number,
    frame: EventFrame,
    signal: AbortSignal,
  ): Promise<boolean> {
    const { retryInitialMs, retryMaxMs } = this.deps.options;
    for (let attempt = 1; !signal.aborted; attempt++) {
      const result = await this.deps.sender.send(subscription.sink, frame, signal);
      if (result.ok) {
        this.progress.delivered++;
        return true;
      }
      if (signal.aborted) break;
      this.progress.failedAttempts++;
      this.report({ ...this.progress });
      const ceiling = Math.min(retryMaxMs, retryInitialMs * 2 ** Math.min(attempt - 1, 30));
      const delay = ceiling / 2 + Math.random() * (ceiling / 2);
      this.log.warn(
        {
          subscription: subscription.id,
          topic: cursor.topic,
          partition: cursor.partition,
          offset,
          eventId: frame.id,
          attempt,
          error: result.error,
          retryInMs: Math.round(delay),
        },
        'delivery failed; retrying',
      );
      await pause(delay, signal);
    }
    return false;
  }

  private async skipDeleted(part: FetchedPartition): Promise<void> {
    const starts = await this.deps.topics.startOffsets(part.topic);
    const start = starts.get(part.partition) ?? 0;
    for (const cursors of this.cursors.values()) {
      const c = cursors.get(partitionKey(part.topic, part.partition));
      if (c && c.nextOffset < start) {
        this.log.error(
          { subscription: c.subscriptionId, topic: c.topic, partition: c.partition, from: c.nextOffset, to: start },
          'events were deleted by Kafka retention before delivery; resuming at the first stored offset',
        );
        c.nextOffset = start;
      }
    }
  }

  /** One statement for every cursor that moved since the last commit. */
  private async commit(): Promise<void> {
    const moved: Cursor[] = [];
    for (const cursors of this.cursors.values()) for (const c of cursors.values()) if (c.nextOffset > c.committed) moved.push(c);
    if (moved.length === 0) return;
    const positions: OffsetPosition[] = moved.map((c) => ({
      subscriptionId: c.subscriptionId,
      topic: c.topic,
      partition: c.partition,
      nextOffset: c.nextOffset,
      epoch: 0,
    }));
    const results = await this.deps.offsets.commit(positions);
    const fenced: FencedError['rejected'] = [];
    results.forEach((r, i) => {
      const c = moved[i];
      if (r.applied) c.committed = c.nextOffset;
      else if (r.rejected === 'SUBSCRIPTION_GONE') {
        this.subscriptions.delete(c.subscriptionId);
        this.cursors.delete(c.subscriptionId);
      } else fenced.push({ subscriptionId: c.subscriptionId, topic: c.topic, partition: c.partition, reason: r.rejected! });
    });
    this.progress.committedAt = new Date().toISOString();
    if (fenced.length > 0) throw new FencedError(fenced);
  }

  private lag(fetched: FetchedPartition[]): number {
    const high = new Map(fetched.filter((f) => f.highWatermark >= 0).map((f) => [partitionKey(f.topic, f.partition), f.highWatermark]));
    let lag = 0;
    for (const cursors of this.cursors.values()) {
      for (const c of cursors.values()) {
        const h = high.get(partitionKey(c.topic, c.partition));
        if (h !== undefined) lag += Math.max(0, h - c.nextOffset);
      }
    }
    return lag;
  }
}

async function pause(ms: number, signal: AbortSignal): Promise<void> {
  try {
    await sleep(ms, undefined, { signal });
  } catch {
    /* aborted: the caller checks the signal */
  }
}

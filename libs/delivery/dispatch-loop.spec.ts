import type { EventFrame } from '../frame';
import { frameToKafkaMessage } from '../frame';
import type { FetchedPartition, PartitionPosition, PartitionReader, TopicAdmin } from '../kafka';
import type { OffsetCommitResult, OffsetPosition, OffsetStore, SubscriptionEntity } from '../storage';
import { DispatchLoop, DispatchProgress, FencedError } from './dispatch-loop';
import type { WebhookResult, WebhookSender } from './webhook-sender';

const TOPIC = 'orders';

function frame(n: number): EventFrame {
  return { id: `e-${n}`, source: '/t', type: 't', specversion: '1.0', extensions: {}, data: Buffer.from(String(n)) };
}

/** An in-memory Kafka log of two partitions, read the way PartitionReader reads. */
class FakeLog {
  readonly partitions: Map<number, EventFrame[]> = new Map([
    [0, []],
    [1, []],
  ]);
  append(partition: number, f: EventFrame) {
    this.partitions.get(partition)!.push(f);
  }
  async fetch(positions: PartitionPosition[]): Promise<FetchedPartition[]> {
    await new Promise((r) => setTimeout(r, 2));
    return positions.map((p) => {
      const log = this.partitions.get(p.partition)!;
      const records = log.slice(p.offset).map((f, i) => {
        const m = frameToKafkaMessage(f);
        const headers = Object.fromEntries(Object.entries(m.headers!).map(([k, v]) => [k, Buffer.from(String(v))]));
        return { offset: p.offset + i, key: null, value: m.value as Buffer, headers, timestamp: 0 };
      });
      return { topic: p.topic, partition: p.partition, fetchOffset: p.offset, records, highWatermark: log.length };
    });
  }
}

class FakeOffsets {
  readonly rows = new Map<string, OffsetPosition>();
  rejectWith?: OffsetCommitResult['rejected'];
  async positionsOf(ids: string[]): Promise<OffsetPosition[]> {
    return [...this.rows.values()].filter((r) => ids.includes(r.subscriptionId));
  }
  async commit(positions: OffsetPosition[]): Promise<OffsetCommitResult[]> {
    return positions.map((position) => {
      if (this.rejectWith) return { position, applied: false, rejected: this.rejectWith };
      this.rows.set(`${position.subscriptionId}#${position.partition}`, position);
      return { position, applied: true };
    });
  }
}

class FakeSender {
  readonly delivered: string[] = [];
  attempts = 0;
  failFirst = 0;
  async send(_sink: string, f: EventFrame): Promise<WebhookResult> {
    this.attempts++;
    if (this.attempts <= this.failFirst) return { ok: false, status: 503, error: 'HTTP 503' };
    this.delivered.push(f.id);
    return { ok: true, status: 200 };
  }
}

const subscription = { id: 'sub-1', topic: TOPIC, sink: 'http://sink', instanceId: 'i1', status: 'ACTIVE' } as SubscriptionEntity;

function setup() {
  const log = new FakeLog();
  const offsets = new FakeOffsets();
  const sender = new FakeSender();
  for (const partition of [0, 1]) {
    offsets.rows.set(`sub-1#${partition}`, { subscriptionId: 'sub-1', topic: TOPIC, partition, nextOffset: 0, epoch: 0 });
  }
  const loop = new DispatchLoop({
    instanceId: 'i1',
    subscriptions: { activeFor: async () => [subscription] },
    offsets: offsets as unknown as OffsetStore,
    reader: log as unknown as PartitionReader,
    topics: { partitionsOf: async () => [0, 1], startOffsets: async () => new Map() } as unknown as TopicAdmin,
    sender: sender as unknown as WebhookSender,
    options: { pollMaxWaitMs: 5, batchMaxEvents: 100, refreshIntervalMs: 10, retryInitialMs: 1, retryMaxMs: 4 },
  });
  return { log, offsets, sender, loop };
}

/** Runs the loop until `done` says so (or 5 s pass), then stops it and returns its last progress. */
async function runUntil(loop: DispatchLoop, done: (p: DispatchProgress) => boolean): Promise<DispatchProgress> {
  const abort = new AbortController();
  const deadline = Date.now() + 5000;
  return loop.run(abort.signal, deadline, (p) => {
    if (done(p)) abort.abort();
  });
}

describe('DispatchLoop', () => {
  it('delivers each partition in order and commits the next offsets after the acks', async () => {
    const { log, offsets, sender, loop } = setup();
    [1, 2, 3].forEach((n) => log.append(0, frame(n)));
    [4, 5].forEach((n) => log.append(1, frame(n)));

    const progress = await runUntil(loop, (p) => p.delivered >= 5);

    expect(progress.delivered).toBe(5);
    expect(sender.delivered.filter((id) => ['e-1', 'e-2', 'e-3'].includes(id))).toEqual(['e-1', 'e-2', 'e-3']);
    expect(sender.delivered.filter((id) => ['e-4', 'e-5'].includes(id))).toEqual(['e-4', 'e-5']);
    expect(offsets.rows.get('sub-1#0')!.nextOffset).toBe(3);
    expect(offsets.rows.get('sub-1#1')!.nextOffset).toBe(2);
  });

  it('retries a failing sink with backoff and never commits past the unacknowledged event', async () => {
    const { log, offsets, sender, loop } = setup();
    log.append(0, frame(1));
    sender.failFirst = 3;

    const progress = await runUntil(loop, (p) => p.delivered >= 1);

    expect(sender.attempts).toBe(4);
    expect(progress.failedAttempts).toBe(3);
    expect(sender.delivered).toEqual(['e-1']);
    expect(offsets.rows.get('sub-1#0')!.nextOffset).toBe(1);
  });

  it('keeps an unacknowledged event uncommitted when stopped mid-retry, so the next run redelivers it', async () => {
    const { log, offsets, sender, loop } = setup();
    log.append(0, frame(1));
    log.append(0, frame(2));
    sender.failFirst = 1_000_000;
    await runUntil(loop, (p) => p.failedAttempts >= 3);
    expect(sender.delivered).toEqual([]);
    expect(offsets.rows.get('sub-1#0')!.nextOffset).toBe(0);
  });

  it('stops with FencedError when Postgres rejects its commit', async () => {
    const { log, offsets, loop } = setup();
    log.append(0, frame(1));
    offsets.rejectWith = 'STALE_EPOCH';
    await expect(runUntil(loop, () => false)).rejects.toBeInstanceOf(FencedError);
  });
});

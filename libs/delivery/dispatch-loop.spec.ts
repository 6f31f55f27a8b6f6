import type { EventFrame } from '@libs/frame';
import { frameToKafkaMessage } from '@libs/frame';
import type { FetchedPartition, PartitionPosition, PartitionReader, TopicAdmin } from '@libs/kafka';
import type { EntityManager } from 'typeorm';
import { StaleEpochError } from '@libs/fence';
import type {
  DeadLetter,
  DeadLetterPosition,
  DeadLetterStore,
  DeadLetterWriteResult,
  LaneStart,
  OffsetCommitResult,
  OffsetPosition,
  OffsetStore,
  ParkedDelivery,
  ParkResult,
  RetryStore,
  SkippedRange,
  SkipRecordResult,
  SubscriptionEntity,
} from '@libs/storage';
import type { WriteFence } from '@libs/fence';
import { DispatchLoop, DispatchLoopOptions, DispatchProgress, FencedError, isFenced } from './dispatch-loop';
import { SinkFailureLog } from './sink-failure-log';
import { STREAM_LANE_DEPTH } from './lane';
import { STREAM_BATCH_DEPTH } from './batch-lanes';
import { MOVING_LANE_FETCH_WAIT_MS } from './partition-feed';
import type { WebhookResult, WebhookSender } from './webhook-sender';
import { waitFor } from '../../test/support/wait-for';

const TOPIC = 'orders';

function frame(n: number): EventFrame {
  return { id: `e-${n}`, source: '/t', type: 't', extensions: {}, data: Buffer.from(String(n)) };
}

type Entry = { frame: EventFrame } | { garbage: string };

/** An in-memory Kafka log of two partitions, read the way PartitionReader reads. */
class FakeLog {
  readonly partitions = new Map<number, Entry[]>([
    [0, []],
    [1, []],
  ]);
  logStart = 0;
  append(partition: number, entry: EventFrame | { garbage: string }) {
    this.partitions.get(partition)!.push('garbage' in entry ? entry : { frame: entry });
  }
  /** The wait each fetch was allowed (the broker's `maxWaitMs`). */
  readonly waits: number[] = [];
  async fetch(positions: PartitionPosition[], options?: { maxWaitMs: number }): Promise<FetchedPartition[]> {
    this.waits.push(options?.maxWaitMs ?? -1);
    await new Promise((r) => setTimeout(r, 2));
    return positions.map((p) => {
      const log = this.partitions.get(p.partition)!;
      if (p.offset < this.logStart || p.offset > log.length) {
        return {
          topic: p.topic,
          partition: p.partition,
          fetchOffset: p.offset,
          records: [],
          highWatermark: -1,
          outOfRange: true,
        };
      }
      const records = log.slice(p.offset).map((entry, i) => {
        if ('garbage' in entry) {
          return { offset: p.offset + i, key: null, value: Buffer.from(entry.garbage), headers: {}, timestamp: 0 };
        }
        const m = frameToKafkaMessage(entry.frame);
        const headers = Object.fromEntries(Object.entries(m.headers!).map(([k, v]) => [k, Buffer.from(String(v))]));
        return { offset: p.offset + i, key: null, value: m.value as Buffer, headers, timestamp: 0 };
      });
      return { topic: p.topic, partition: p.partition, fetchOffset: p.offset, records, highWatermark: log.length };
    });
  }
}

/**
 * The offset store's contract (offset-store.ts): a commit applies only forward, and under the same or a newer
 * epoch (0 keeps the stored epoch); otherwise it changes nothing and says why, with the row it lost to.
 */
class FakeOffsets {
  readonly rows = new Map<string, OffsetPosition>();
  rejectWith?: OffsetCommitResult['rejected'];
  rewinds: OffsetPosition[] = [];
  readonly refused: OffsetCommitResult[] = [];
  async positionsOf(ids: string[]): Promise<OffsetPosition[]> {
    return [...this.rows.values()].filter((r) => ids.includes(r.subscriptionId));
  }
  /** Runs once, just before the next commit applies (an operator's seek landing right before a loop's commit). */
  beforeNextCommit?: () => void;
  async commit(positions: OffsetPosition[]): Promise<OffsetCommitResult[]> {
    const before = this.beforeNextCommit;
    this.beforeNextCommit = undefined;
    before?.();
    const results = positions.map((position): OffsetCommitResult => {
      const k = `${position.subscriptionId}#${position.partition}`;
      const row = this.rows.get(k);
      const current = row && { nextOffset: row.nextOffset, epoch: row.epoch, generation: row.generation ?? 0 };
      if (this.rejectWith) return { position, applied: false, rejected: this.rejectWith, current };
      if (row && position.epoch > 0 && row.epoch > position.epoch)
        return { position, applied: false, rejected: 'STALE_EPOCH', current };
      if (row && (row.generation ?? 0) > (position.generation ?? 0))
        return { position, applied: false, rejected: 'SEEKED', current };
      if (row && row.nextOffset > position.nextOffset)
        return { position, applied: false, rejected: 'BACKWARDS', current };
      this.rows.set(k, {
        ...position,
        epoch: Math.max(row?.epoch ?? 0, position.epoch),
        generation: Math.max(row?.generation ?? 0, position.generation ?? 0),
      });
      return { position, applied: true, current };
    });
    this.refused.push(...results.filter((r) => !r.applied));
    return results;
  }
  async rewind(position: OffsetPosition): Promise<boolean> {
    this.rewinds.push(position);
    this.rows.set(`${position.subscriptionId}#${position.partition}`, position);
    return true;
  }
  at(subscriptionId: string, partition: number): number | undefined {
    return this.rows.get(`${subscriptionId}#${partition}`)?.nextOffset;
  }
}

/** A sender whose answer depends on the sink: `failing` sinks answer 503 until `recover()`. */
class FakeSender {
  readonly delivered: { sink: string; id: string }[] = [];
  readonly attempts = new Map<string, number>();
  readonly failing = new Set<string>();
  failFirst = 0;
  readonly answers = new Map<string, WebhookResult>();
  readonly messageIds: string[] = [];
  /** Sends to these sinks wait for `release` (a stream client that has not answered yet). */
  readonly holding = new Set<string>();
  readonly held = new Map<string, () => void>();
  maxHeld = 0;
  /** Events whose first `n` attempts fail. */
  readonly failIds = new Map<string, number>();
  /** When each event's attempts started. */
  readonly times = new Map<string, number[]>();
  /** Every attempt's event id, in the order the attempts started. */
  readonly tried: string[] = [];
  /** The abort signal each event's latest attempt was given. */
  readonly signals = new Map<string, AbortSignal | undefined>();
  /** Events whose attempt was given a signal already aborted (a real send fails at once). */
  readonly abortedAtStart: string[] = [];
  async send(target: { sink: string }, f: EventFrame, messageId: string, signal?: AbortSignal): Promise<WebhookResult> {
    const sink = target.sink;
    this.tried.push(f.id);
    this.signals.set(f.id, signal);
    if (signal?.aborted) this.abortedAtStart.push(f.id);
    this.times.set(f.id, [...(this.times.get(f.id) ?? []), Date.now()]);
    if (this.holding.has(sink)) {
      await new Promise<void>((resolve) => {
        this.held.set(f.id, resolve);
        this.maxHeld = Math.max(this.maxHeld, this.held.size);
      });
      this.held.delete(f.id);
    }
    const failures = this.failIds.get(f.id) ?? 0;
    if (failures > 0) {
      this.failIds.set(f.id, failures - 1);
      return { ok: false, error: 'nacked' };
    }
    const n = (this.attempts.get(sink) ?? 0) + 1;
    this.attempts.set(sink, n);
    this.messageIds.push(messageId);
    const answer = this.answers.get(sink);
    if (answer) return answer;
    if (this.failing.has(sink) || n <= this.failFirst) return { ok: false, status: 503, error: 'HTTP 503' };
    this.delivered.push({ sink, id: f.id });
    return { ok: true, status: 200 };
  }
  idsFor(sink: string): string[] {
    return this.delivered.filter((d) => d.sink === sink).map((d) => d.id);
  }
  /** Batches sent, each its events' ids; a held batch waits under its first event's id. */
  readonly batches: string[][] = [];
  async sendBatch(target: { sink: string }, batch: { frames: EventFrame[] }): Promise<WebhookResult> {
    const ids = batch.frames.map((f) => f.id);
    this.batches.push(ids);
    if (this.holding.has(target.sink)) {
      await new Promise<void>((resolve) => {
        this.held.set(ids[0], resolve);
        this.maxHeld = Math.max(this.maxHeld, this.held.size);
      });
      this.held.delete(ids[0]);
    }
    for (const id of ids) this.delivered.push({ sink: target.sink, id });
    return { ok: true, status: 200 };
  }
}

/**
 * The dead-letter store's contract (dead-letter-store.ts): one letter per subscription and log position; writing
 * a position again keeps the first and says so.
 */
class FakeDeadLetters {
  readonly added: DeadLetter[] = [];
  readonly refused: DeadLetterWriteResult[] = [];
  private key = (l: { subscriptionId: string; topic: string; partition: number; offset: number }) =>
    `${l.subscriptionId}#${l.topic}#${l.partition}#${l.offset}`;
  async add(letters: DeadLetter[]): Promise<DeadLetterWriteResult[]> {
    return letters.map((l) => {
      const position = { subscriptionId: l.subscriptionId, topic: l.topic, partition: l.partition, offset: l.offset };
      if (this.added.some((a) => this.key(a) === this.key(l))) {
        const result: DeadLetterWriteResult = { position, written: false, rejected: 'ALREADY_DEAD_LETTERED' };
        this.refused.push(result);
        return result;
      }
      this.added.push(l);
      return { position, written: true };
    });
  }
  async deadLetteredFrom(starts: LaneStart[]): Promise<DeadLetterPosition[]> {
    return this.added
      .filter((l) =>
        starts.some(
          (s) =>
            s.subscriptionId === l.subscriptionId &&
            s.topic === l.topic &&
            s.partition === l.partition &&
            l.offset >= s.nextOffset,
        ),
      )
      .map((l) => ({ subscriptionId: l.subscriptionId, topic: l.topic, partition: l.partition, offset: l.offset }));
  }
}

/** The retry table in memory: due means nextAttemptAt has passed. */
class FakeRetries {
  readonly rows = new Map<string, ParkedDelivery>();
  /** The wait each park or reschedule set, from the moment it was written. */
  readonly scheduledDelays: number[] = [];
  constructor(private readonly deadLetters: FakeDeadLetters) {}
  private key = (k: { subscriptionId: string; partition: number; offset: number }) =>
    `${k.subscriptionId}#${k.partition}#${k.offset}`;
  /** Parks written, and parks refused at the cap (retry-store.ts: the first parking stands; none past the cap). */
  parks = 0;
  refusedAtCap = 0;
  async park(d: ParkedDelivery, _manager?: EntityManager, maxParked = Infinity): Promise<ParkResult> {
    const count = [...this.rows.values()].filter((r) => r.subscriptionId === d.subscriptionId).length;
    if (this.rows.has(this.key(d))) return { delivery: d, applied: true, outcome: 'ALREADY_PARKED', parked: count };
    if (count >= maxParked) {
      this.refusedAtCap++;
      return { delivery: d, applied: false, rejected: 'AT_CAP', parked: count };
    }
    this.scheduledDelays.push(d.nextAttemptAt.getTime() - Date.now());
    this.rows.set(this.key(d), { ...d });
    this.parks++;
    return { delivery: d, applied: true, outcome: 'PARKED', parked: count + 1 };
  }
  async backlogOf(
    lane: { subscriptionId: string; topic: string; partition: number },
    limit: number,
    afterOffset = -1,
  ): Promise<ParkedDelivery[]> {
    return [...this.rows.values()]
      .filter(
        (r) => r.subscriptionId === lane.subscriptionId && r.partition === lane.partition && r.offset > afterOffset,
      )
      .sort((a, b) => a.offset - b.offset)
      .slice(0, limit);
  }
  async due(ids: string[], limit: number): Promise<ParkedDelivery[]> {
    return [...this.rows.values()]
      .filter((r) => ids.includes(r.subscriptionId) && r.nextAttemptAt.getTime() <= Date.now())
      .slice(0, limit);
  }
  async reschedule(k: ParkedDelivery, attempts: number, nextAttemptAt: Date, lastError: string): Promise<void> {
    this.scheduledDelays.push(nextAttemptAt.getTime() - Date.now());
    // An UPDATE: a row that is gone (delivered or forgotten meanwhile) stays gone.
    const row = this.rows.get(this.key(k));
    if (row) Object.assign(row, { attempts, nextAttemptAt, lastError });
  }
  async delivered(k: ParkedDelivery): Promise<void> {
    this.rows.delete(this.key(k));
  }
  async deadLetter(letter: DeadLetter): Promise<void> {
    await this.deadLetters.add([letter]);
    this.rows.delete(this.key(letter));
  }
  async forgetReplayed(positions: { subscriptionId: string; partition: number; nextOffset: number }[]): Promise<void> {
    for (const p of positions) await this.forgetFrom(p.subscriptionId, '', p.partition, p.nextOffset);
  }
  async forgetFrom(subscriptionId: string, _topic: string, partition: number, offset: number): Promise<void> {
    for (const [k, r] of this.rows)
      if (r.subscriptionId === subscriptionId && r.partition === partition && r.offset >= offset) this.rows.delete(k);
  }
}

/** The skipped-range store's contract (skipped-range-store.ts): one row per range start, extended, never counted twice. */
class FakeSkipped {
  readonly ranges = new Map<string, SkippedRange>();
  async record(range: SkippedRange): Promise<SkipRecordResult> {
    if (range.toOffset <= range.fromOffset) return { range, applied: false, rejected: 'EMPTY_RANGE', newlySkipped: 0 };
    const k = `${range.subscriptionId}#${range.partition}#${range.fromOffset}`;
    const prior = this.ranges.get(k);
    if (prior && prior.toOffset >= range.toOffset)
      return { range, applied: true, outcome: 'ALREADY_RECORDED', newlySkipped: 0, previousToOffset: prior.toOffset };
    this.ranges.set(k, { ...range });
    if (!prior) return { range, applied: true, outcome: 'RECORDED', newlySkipped: range.toOffset - range.fromOffset };
    return {
      range,
      applied: true,
      outcome: 'EXTENDED',
      newlySkipped: range.toOffset - prior.toOffset,
      previousToOffset: prior.toOffset,
    };
  }
}

/**
 * The fence's contract (epoch-fence.ts): the work runs only while the fenced epoch is current; once `stale`, every
 * write is refused with StaleEpochError before it runs, and counted.
 */
class FakeFence implements WriteFence {
  readonly epoch = 1;
  readonly rowEpoch = 0;
  stale = false;
  refused = 0;
  readonly manager = {} as EntityManager;
  async run<T>(work: (manager: EntityManager | undefined) => Promise<T>): Promise<T> {
    if (this.stale) {
      this.refused++;
      throw new StaleEpochError({ kind: 'dispatch-run', instanceId: 'i1' }, this.epoch, this.epoch + 1);
    }
    return work(this.manager);
  }
}

const subscription = (id: string, sink = `http://${id}`) =>
  ({ id, topic: TOPIC, sink, instanceId: 'i1', status: 'ACTIVE' }) as SubscriptionEntity;
const stream = (id: string) => ({ ...subscription(id, `stream:${id}`), protocol: 'STREAM' }) as SubscriptionEntity;

function setup(
  subscriptions: SubscriptionEntity[] = [subscription('sub-1')],
  maxAttempts = 1000,
  batchMaxEvents = 100,
  bounds: Partial<DispatchLoopOptions> = {},
  gate?: () => boolean,
) {
  const log = new FakeLog();
  const offsets = new FakeOffsets();
  const sender = new FakeSender();
  const deadLetters = new FakeDeadLetters();
  const retries = new FakeRetries(deadLetters);
  const skipped = new FakeSkipped();
  let active = subscriptions;
  const disabled: string[] = [];
  const fence = new FakeFence();
  const disabledIn: (EntityManager | undefined)[] = [];
  for (const s of subscriptions) {
    for (const partition of [0, 1]) {
      offsets.rows.set(`${s.id}#${partition}`, {
        subscriptionId: s.id,
        topic: TOPIC,
        partition,
        nextOffset: 0,
        epoch: 0,
      });
    }
  }
  const loop = new DispatchLoop({
    instanceId: 'i1',
    subscriptions: {
      activeFor: async () => active,
      disable: async (id: string, _reason: string, manager?: EntityManager) => {
        disabled.push(id);
        disabledIn.push(manager);
        active = active.filter((s) => s.id !== id);
      },
    },
    offsets: offsets as unknown as OffsetStore,
    deadLetters: deadLetters as unknown as DeadLetterStore,
    retries: retries as unknown as RetryStore,
    skipped,
    reader: log as unknown as PartitionReader,
    topics: {
      isServed: (t: string) => t === TOPIC,
      partitionsOf: async () => [0, 1],
      startOffsets: async () =>
        new Map([
          [0, log.logStart],
          [1, log.logStart],
        ]),
      endOffsets: async () =>
        new Map([
          [0, log.partitions.get(0)!.length],
          [1, log.partitions.get(1)!.length],
        ]),
    } as unknown as TopicAdmin,
    sender: sender as unknown as WebhookSender,
    options: {
      pollMaxWaitMs: 5,
      batchMaxEvents,
      refreshIntervalMs: 10,
      retryInitialMs: 1,
      retryMaxMs: 4,
      maxAttempts,
      ...bounds,
    },
    fence,
    gate,
  });
  return {
    log,
    offsets,
    sender,
    deadLetters,
    retries,
    skipped,
    loop,
    disabled,
    disabledIn,
    fence,
    setActive: (s: SubscriptionEntity[]) => (active = s),
  };
}

/** Runs the loop until `done` says so (or 5 s pass), then stops it and returns its last progress. */
async function runUntil(loop: DispatchLoop, done: (p: DispatchProgress) => boolean): Promise<DispatchProgress> {
  const abort = new AbortController();
  return loop.run(abort.signal, Date.now() + 5000, (p) => {
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
    expect(sender.idsFor('http://sub-1').filter((id) => ['e-1', 'e-2', 'e-3'].includes(id))).toEqual([
      'e-1',
      'e-2',
      'e-3',
    ]);
    expect(sender.idsFor('http://sub-1').filter((id) => ['e-4', 'e-5'].includes(id))).toEqual(['e-4', 'e-5']);
    expect(offsets.at('sub-1', 0)).toBe(3);
    expect(offsets.at('sub-1', 1)).toBe(2);
  });

  it('passes over events a crashed run dead-lettered after its last commit: no delivery, no second letter', async () => {
    const { log, offsets, sender, deadLetters, loop } = setup();
    [1, 2, 3].forEach((n) => log.append(0, frame(n)));
    // The previous run dead-lettered offsets 0 and 2 and died before committing: the stored offset is still 0.
    const letter = (offset: number): DeadLetter => ({
      subscriptionId: 'sub-1',
      topic: TOPIC,
      partition: 0,
      offset,
      eventId: `e-${offset + 1}`,
      attributes: {},
      data: null,
      attempts: 10,
      lastError: 'HTTP 503',
      firstFailedAt: new Date(),
      lastFailedAt: new Date(),
    });
    await deadLetters.add([letter(0), letter(2)]);

    const progress = await runUntil(loop, (p) => p.delivered >= 1 && (p.passedOverDeadLettered ?? 0) >= 2);

    expect(sender.idsFor('http://sub-1')).toEqual(['e-2']);
    expect(progress.passedOverDeadLettered).toBe(2);
    expect(deadLetters.added).toHaveLength(2);
    expect(deadLetters.refused).toEqual([]);
    expect(offsets.at('sub-1', 0)).toBe(3);
  });

  it('a seek that lands before a commit: the commit is refused as SEEKED, and the lanes restart from the new offsets', async () => {
    const { log, offsets, sender, loop } = setup();
    [1, 2, 3].forEach((n) => log.append(0, frame(n)));
    // The seek (OffsetStore.seek): partition 0 back to offset 0 under generation 1, the subscription's generation too.
    offsets.beforeNextCommit = () => {
      offsets.rows.set('sub-1#0', {
        subscriptionId: 'sub-1',
        topic: TOPIC,
        partition: 0,
        nextOffset: 0,
        epoch: 0,
        generation: 1,
      });
      offsets.rows.set('sub-1#1', {
        subscriptionId: 'sub-1',
        topic: TOPIC,
        partition: 1,
        nextOffset: 0,
        epoch: 0,
        generation: 1,
      });
    };

    const progress = await runUntil(loop, (p) => p.delivered >= 6 && offsets.at('sub-1', 0) === 3);

    expect(offsets.refused.map((r) => r.rejected)).toEqual(['SEEKED']);
    // Delivered again from the seek's offset: the refused commit did not count.
    expect(sender.idsFor('http://sub-1')).toEqual(['e-1', 'e-2', 'e-3', 'e-1', 'e-2', 'e-3']);
    expect(progress.delivered).toBe(6);
  });

  it('a seek seen at a refresh: an idle lane of an older generation restarts from the new offsets', async () => {
    const { log, offsets, sender, loop, setActive } = setup();
    [1, 2].forEach((n) => log.append(1, frame(n)));
    let seeked = false;
    const progress = await runUntil(loop, (p) => {
      if (!seeked && p.delivered === 2 && offsets.at('sub-1', 1) === 2) {
        // Caught up and committed; now the seek: partition 1 back to 1, and the subscription's generation raised.
        seeked = true;
        offsets.rows.set('sub-1#1', {
          subscriptionId: 'sub-1',
          topic: TOPIC,
          partition: 1,
          nextOffset: 1,
          epoch: 0,
          generation: 1,
        });
        offsets.rows.set('sub-1#0', { ...offsets.rows.get('sub-1#0')!, generation: 1 });
        setActive([{ ...subscription('sub-1'), offsetsGeneration: 1 } as SubscriptionEntity]);
      }
      return seeked && p.delivered >= 3;
    });

    expect(sender.idsFor('http://sub-1')).toEqual(['e-1', 'e-2', 'e-2']);
    expect(progress.seeksApplied).toBe(2);
    expect(offsets.refused).toEqual([]);
  });

  it('retries a failing sink with backoff and never commits past the unacknowledged event', async () => {
    const { log, offsets, sender, loop } = setup();
    log.append(0, frame(1));
    sender.failFirst = 3;

    const progress = await runUntil(loop, (p) => p.delivered >= 1);

    expect(sender.attempts.get('http://sub-1')).toBe(4);
    expect(progress.failedAttempts).toBe(3);
    expect(sender.idsFor('http://sub-1')).toEqual(['e-1']);
    expect(offsets.at('sub-1', 0)).toBe(1);
  });

  it("names the request that published an event (its Kafka record's id) in the failure lines of its delivery", async () => {
    const failed = jest.spyOn(SinkFailureLog.prototype, 'failed');
    try {
      const { log, sender, loop } = setup();
      log.append(0, { ...frame(1), requestId: 'req-42' });
      sender.failFirst = 2;

      await runUntil(loop, (p) => p.delivered >= 1);

      expect(
        failed.mock.calls.map(([id, sink, outcome, fields]) => [id, sink, outcome, fields.eventId, fields.requestId]),
      ).toEqual([
        ['sub-1', 'http://sub-1', 'retrying', 'e-1', 'req-42'],
        ['sub-1', 'http://sub-1', 'retrying', 'e-1', 'req-42'],
      ]);
    } finally {
      failed.mockRestore();
    }
  });

  it('keeps an unacknowledged event uncommitted when stopped mid-retry, so the next run redelivers it', async () => {
    // Retries at least 100 ms apart: the loop is stopped well before a third attempt would park the event.
    const slow = {
      ...subscription('sub-1'),
      config: { retry: { initialDelayMs: 200, maxDelayMs: 200 } },
    } as unknown as SubscriptionEntity;
    const { log, offsets, sender, loop } = setup([slow]);
    log.append(0, frame(1));
    log.append(0, frame(2));
    sender.failing.add('http://sub-1');
    // Two failed attempts: still retrying in the lane (the third would park it).
    await runUntil(loop, (p) => p.failedAttempts >= 2);
    expect(sender.delivered).toEqual([]);
    expect(offsets.at('sub-1', 0)).toBe(0);
  });

  it('parks a delivery after three failed attempts, moves on, and delivers it later from the retry table', async () => {
    const { log, offsets, sender, retries, loop } = setup();
    log.append(0, frame(1));
    log.append(0, frame(2));
    sender.failFirst = 3;

    const progress = await runUntil(loop, (p) => p.delivered >= 2);

    expect(progress.parked).toBe(1);
    expect(sender.idsFor('http://sub-1')).toEqual(['e-2', 'e-1']);
    expect(retries.rows.size).toBe(0);
    expect(offsets.at('sub-1', 0)).toBe(2);
  });

  it('dead-letters a delivery after the last attempt, with the attempt count and the last error', async () => {
    const { log, offsets, sender, deadLetters, retries, loop } = setup([subscription('sub-1')], 5);
    log.append(0, frame(1));
    sender.failing.add('http://sub-1');

    const progress = await runUntil(loop, (p) => p.deadLettered >= 1);

    expect(progress.failedAttempts).toBe(5);
    expect(deadLetters.added).toHaveLength(1);
    expect(deadLetters.added[0]).toMatchObject({
      subscriptionId: 'sub-1',
      partition: 0,
      offset: 0,
      eventId: 'e-1',
      attempts: 5,
      lastError: 'HTTP 503',
    });
    expect(deadLetters.added[0].data).toEqual(Buffer.from('1'));
    expect(retries.rows.size).toBe(0);
    expect(offsets.at('sub-1', 0)).toBe(1);
  });

  it('takes a retry policy from the subscription over the defaults', async () => {
    const own = { ...subscription('sub-1'), config: { retry: { maxAttempts: 2 } } } as unknown as SubscriptionEntity;
    const { log, sender, deadLetters, loop } = setup([own]);
    log.append(0, frame(1));
    sender.failing.add('http://sub-1');
    await runUntil(loop, (p) => p.deadLettered >= 1);
    expect(deadLetters.added[0].attempts).toBe(2);
  });

  it('keeps up to STREAM_LANE_DEPTH deliveries of a stream lane out at once, and commits only over the settled front', async () => {
    const total = STREAM_LANE_DEPTH + 8;
    const { log, offsets, sender, loop } = setup([stream('s')], 1000, total);
    for (let n = 0; n < total; n++) log.append(0, frame(n));
    // Partition 1's lane shows when a commit ran: every lane that moved is committed in the same statement.
    log.append(1, frame(100000));
    sender.holding.add('stream:s');
    const abort = new AbortController();
    const running = loop.run(abort.signal, Date.now() + 10000, () => undefined);
    const until = (what: string, done: () => boolean) => waitFor(what, done, { timeoutMs: 5000, intervalMs: 5 });
    try {
      await until(
        'the lane depth of partition 0 out, and partition 1 out',
        () => sender.held.size === STREAM_LANE_DEPTH + 1,
      );
      expect(sender.maxHeld).toBe(STREAM_LANE_DEPTH + 1);
      // Answered out of order: offset 5 settles first. After a commit that moved partition 1, partition 0 is
      // still at 0: its offset waits for 0..4.
      sender.held.get('e-5')!();
      await until('the delivery of e-5', () => sender.idsFor('stream:s').includes('e-5'));
      sender.held.get('e-100000')!();
      await until('a commit of partition 1', () => offsets.at('s', 1) === 1);
      expect(offsets.at('s', 0)).toBe(0);
      for (const n of [0, 1, 2, 3, 4]) sender.held.get(`e-${n}`)!();
      await until('a commit over 0..5', () => offsets.at('s', 0) === 6);
      await until('the rest', () => {
        for (const release of sender.held.values()) release();
        return sender.idsFor('stream:s').length === total + 1;
      });
      await until('a commit over all of partition 0', () => offsets.at('s', 0) === total);
    } finally {
      abort.abort();
      await running;
    }
  });

  it('keeps up to STREAM_BATCH_DEPTH batches of a batched stream lane out at once, each of events not out yet, and commits over them all', async () => {
    const batched = { ...stream('s'), config: { batch: { maxEvents: 10 } } } as SubscriptionEntity;
    const { log, offsets, sender, loop } = setup([batched], 1000, 100);
    const total = 10 * STREAM_BATCH_DEPTH + 25;
    for (let n = 0; n < total; n++) log.append(0, frame(n));
    sender.holding.add('stream:s');
    const abort = new AbortController();
    const running = loop.run(abort.signal, Date.now() + 10000, () => undefined);
    const until = (what: string, done: () => boolean) => waitFor(what, done, { timeoutMs: 5000, intervalMs: 5 });
    try {
      await until('the lane depth of batches out', () => sender.held.size === STREAM_BATCH_DEPTH);
      await new Promise((r) => setTimeout(r, 50));
      expect(sender.maxHeld).toBe(STREAM_BATCH_DEPTH);
      // Consecutive events, each out once: 0-9, 10-19, ...
      expect(sender.batches).toEqual(
        Array.from({ length: STREAM_BATCH_DEPTH }, (_, b) => Array.from({ length: 10 }, (_, i) => `e-${b * 10 + i}`)),
      );
      // The second batch answered first: the next batch goes out, the offset waits for the first.
      sender.held.get('e-10')!();
      await until('the next batch out', () => sender.batches.length === STREAM_BATCH_DEPTH + 1);
      expect(sender.batches.at(-1)![0]).toBe(`e-${10 * STREAM_BATCH_DEPTH}`);
      expect(offsets.at('s', 0)).toBe(0);
      await until('every event delivered', () => {
        for (const release of sender.held.values()) release();
        return sender.idsFor('stream:s').length === total;
      });
      expect(new Set(sender.idsFor('stream:s')).size).toBe(total);
      await until('a commit over all of partition 0', () => offsets.at('s', 0) === total);
    } finally {
      abort.abort();
      await running;
    }
  });

  it('fetches with a short wait while a lane above its refill mark moves, with the whole wait while it does not', async () => {
    const { log, sender, loop } = setup([stream('s')], 1000, 100, { pollMaxWaitMs: 1000, refreshIntervalMs: 60000 });
    const total = STREAM_LANE_DEPTH + 300;
    for (let n = 0; n < total; n++) log.append(0, frame(n));
    sender.holding.add('stream:s');
    const abort = new AbortController();
    const running = loop.run(abort.signal, Date.now() + 60000, () => undefined);
    const until = (what: string, done: () => boolean) => waitFor(what, done, { timeoutMs: 5000, intervalMs: 2 });
    try {
      // The lane's depth out and unanswered, and a full buffer behind it: the lane holds still, and partition 1's
      // fetch waits.
      await until('the lane depth out', () => sender.held.size === STREAM_LANE_DEPTH);
      await until('a fetch with the whole wait', () => log.waits.at(-1) === 1000);
      const before = log.waits.length;
      // Answered a few at a time: the lane moves through its buffer with its depth out, and the fetches meanwhile
      // wait briefly.
      await until('every event delivered', () => {
        for (const release of [...sender.held.values()].slice(0, 20)) release();
        return sender.idsFor('stream:s').length === total;
      });
      expect(log.waits.slice(before)).toContain(MOVING_LANE_FETCH_WAIT_MS);
    } finally {
      abort.abort();
      await running;
    }
  });

  it('fetches the next records of a stream lane while its deliveries are out: what is out does not fill the lane', async () => {
    // batchMaxEvents 100: a client that holds every delivery unanswered (a sink writing a window's worth in one go)
    // still gets the next records as the lane fetches them, up to the lane's depth; none is answered meanwhile.
    const { log, sender, loop } = setup([stream('s')], 1000, 100);
    for (let n = 0; n < 450; n++) log.append(0, frame(n));
    sender.holding.add('stream:s');
    const abort = new AbortController();
    const running = loop.run(abort.signal, Date.now() + 10000, () => undefined);
    try {
      await waitFor('all 450 out at once', () => sender.held.size === 450, { timeoutMs: 5000, intervalMs: 5 });
      expect(sender.idsFor('stream:s')).toEqual([]);
    } finally {
      // Answered, so the run ends at the abort rather than at its deadline with 450 deliveries out.
      for (const release of sender.held.values()) release();
      abort.abort();
      await running;
    }
  });

  it('starts events that arrive while a stream lane has deliveries out, without waiting for one to end', async () => {
    const { log, sender, loop } = setup([stream('s')]);
    log.append(0, frame(0));
    sender.holding.add('stream:s');
    const abort = new AbortController();
    const running = loop.run(abort.signal, Date.now() + 10000, () => undefined);
    try {
      await waitFor('e-0 out', () => sender.held.has('e-0'), { timeoutMs: 5000, intervalMs: 5 });
      log.append(0, frame(1));
      await waitFor('e-1 out while e-0 is', () => sender.held.has('e-1') && sender.held.has('e-0'), {
        timeoutMs: 5000,
        intervalMs: 5,
      });
    } finally {
      for (const release of sender.held.values()) release();
      abort.abort();
      await running;
    }
  });

  it('retries a failed stream delivery in its lane while the later events of the partition go on', async () => {
    const { log, offsets, sender, loop } = setup([stream('s')]);
    for (let n = 0; n < 5; n++) log.append(0, frame(n));
    sender.failIds.set('e-0', 2);
    const progress = await runUntil(loop, () => sender.idsFor('stream:s').length === 5 && offsets.at('s', 0) === 5);
    expect(progress.failedAttempts).toBe(2);
    expect(progress.parked).toBe(0);
    const order = sender.idsFor('stream:s');
    expect(order[order.length - 1]).toBe('e-0');
    expect(order.slice(0, 4)).toEqual(['e-1', 'e-2', 'e-3', 'e-4']);
  });

  it('keeps a webhook lane in order: nothing after a failed event goes out before its retry succeeds', async () => {
    const { log, sender, loop } = setup();
    for (let n = 0; n < 5; n++) log.append(0, frame(n));
    sender.failIds.set('e-0', 2);
    await runUntil(loop, (p) => p.delivered >= 5);
    expect(sender.idsFor('http://sub-1')).toEqual(['e-0', 'e-1', 'e-2', 'e-3', 'e-4']);
  });

  it('lets a healthy subscription go on while another one fails', async () => {
    const { log, offsets, sender, retries, loop } = setup([subscription('down'), subscription('up')]);
    [1, 2, 3, 4].forEach((n) => log.append(n % 2, frame(n)));
    sender.failing.add('http://down');

    await runUntil(loop, (p) => p.delivered >= 4 && p.failedAttempts >= 2);

    expect(sender.idsFor('http://up').sort()).toEqual(['e-1', 'e-2', 'e-3', 'e-4']);
    expect(sender.idsFor('http://down')).toEqual([]);
    expect([offsets.at('up', 0), offsets.at('up', 1)]).toEqual([2, 2]);
    // The failing subscription's offsets move only over what it parked (after three attempts), never further.
    const parkedIn = (p: number) =>
      [...retries.rows.values()].filter((r) => r.subscriptionId === 'down' && r.partition === p).length;
    expect([offsets.at('down', 0), offsets.at('down', 1)]).toEqual([parkedIn(0), parkedIn(1)]);
  });

  it('stops retrying a subscription that was deleted', async () => {
    const { log, sender, loop, setActive } = setup();
    log.append(0, frame(1));
    sender.failing.add('http://sub-1');
    let attemptsWhenClosed: number | undefined;
    let roundsWhenClosed = 0;
    await runUntil(loop, (p) => {
      if (p.failedAttempts >= 2) setActive([]);
      if (p.subscriptions === 0 && attemptsWhenClosed === undefined) {
        attemptsWhenClosed = sender.attempts.get('http://sub-1')!;
        roundsWhenClosed = p.rounds;
      }
      return attemptsWhenClosed !== undefined && p.rounds > roundsWhenClosed + 50;
    });
    // Fifty rounds after the lane closed (each far longer than the 4 ms retry ceiling), not one more attempt.
    expect(sender.attempts.get('http://sub-1')).toBe(attemptsWhenClosed);
  });

  it('dead-letters a record that is not a CloudEvent and goes on past it', async () => {
    const { log, offsets, sender, deadLetters, loop } = setup();
    log.append(0, frame(1));
    log.append(0, { garbage: 'not an event' });
    log.append(0, frame(3));

    const progress = await runUntil(loop, (p) => p.delivered >= 2);

    expect(sender.idsFor('http://sub-1')).toEqual(['e-1', 'e-3']);
    expect(progress.deadLettered).toBe(1);
    expect(deadLetters.added).toHaveLength(1);
    expect(deadLetters.added[0]).toMatchObject({
      subscriptionId: 'sub-1',
      partition: 0,
      offset: 1,
      data: Buffer.from('not an event'),
    });
    expect(deadLetters.added[0].lastError).toContain('not a CloudEvent');
    expect(offsets.at('sub-1', 0)).toBe(3);
  });

  it('resumes at the first stored offset when retention deleted what it had not delivered', async () => {
    const { log, offsets, sender, loop } = setup();
    [1, 2, 3, 4].forEach((n) => log.append(0, frame(n)));
    log.logStart = 2;

    await runUntil(loop, (p) => p.delivered >= 2);

    expect(sender.idsFor('http://sub-1')).toEqual(['e-3', 'e-4']);
    expect(offsets.at('sub-1', 0)).toBe(4);
  });

  it('rewinds a stored offset that points past the end of the log', async () => {
    const { log, offsets, sender, loop } = setup();
    offsets.rows.set('sub-1#0', { subscriptionId: 'sub-1', topic: TOPIC, partition: 0, nextOffset: 10, epoch: 0 });
    log.append(0, frame(1));
    log.append(0, frame(2));

    await runUntil(loop, () => offsets.rewinds.length > 0);
    expect(offsets.rewinds[0]).toMatchObject({ subscriptionId: 'sub-1', partition: 0, nextOffset: 2 });
    log.append(0, frame(3));
    await runUntil(loop, (p) => p.delivered >= 1);
    expect(sender.idsFor('http://sub-1')).toEqual(['e-3']);
  });

  it('disables a subscription whose sink answers 410 Gone, and delivers nothing more to it', async () => {
    const { log, offsets, sender, loop, disabled } = setup();
    log.append(0, frame(1));
    log.append(0, frame(2));
    sender.answers.set('http://sub-1', { ok: false, status: 410, error: 'HTTP 410', gone: true });

    await runUntil(loop, (p) => disabled.length > 0 && p.subscriptions === 0);

    expect(disabled).toEqual(['sub-1']);
    expect(sender.attempts.get('http://sub-1')).toBe(1);
    expect(offsets.at('sub-1', 0)).toBe(0);
  });

  it('waits at least as long as Retry-After says before each next attempt, in the lane and in the retry table', async () => {
    const { log, sender, retries, loop } = setup();
    log.append(0, frame(1));
    sender.answers.set('http://sub-1', { ok: false, status: 429, error: 'HTTP 429', retryAfterMs: 150 });
    // Two retries in the lane, then parked, then one attempt from the retry table and rescheduled.
    await runUntil(loop, () => retries.scheduledDelays.length >= 2);
    const times = sender.times.get('e-1')!;
    const gaps = times.slice(1, 3).map((t, i) => t - times[i]);
    // The backoff alone waits at most 4 ms here; a timer may fire a millisecond early.
    expect(gaps).toHaveLength(2);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(148);
    expect(retries.scheduledDelays).toHaveLength(2);
    for (const delay of retries.scheduledDelays) expect(delay).toBeGreaterThanOrEqual(148);
  });

  it('gives each delivery a message id that stays the same across its retries', async () => {
    const { log, sender, loop } = setup();
    log.append(1, frame(1));
    sender.failFirst = 2;
    await runUntil(loop, (p) => p.delivered >= 1);
    expect(sender.messageIds).toEqual(Array(3).fill('sub-1:orders:1:0'));
  });

  it('passes over the events its filters do not match, and commits past them', async () => {
    const picky = { ...subscription('sub-1'), filters: [{ exact: { type: 'keep' } }] } as unknown as SubscriptionEntity;
    const { log, offsets, sender, loop } = setup([picky]);
    log.append(0, { ...frame(1), type: 'drop' });
    log.append(0, { ...frame(2), type: 'keep' });
    log.append(0, { ...frame(3), type: 'drop' });

    const progress = await runUntil(loop, (p) => p.delivered + p.filteredOut >= 3);

    expect(sender.idsFor('http://sub-1')).toEqual(['e-2']);
    expect(progress.filteredOut).toBe(2);
    expect(offsets.at('sub-1', 0)).toBe(3);
  });

  it('closes the lane of a subscription deleted while its failed delivery was being parked', async () => {
    const { log, sender, retries, loop } = setup();
    log.append(0, frame(1));
    sender.failing.add('http://sub-1');
    retries.park = async () => {
      throw Object.assign(new Error('violates foreign key constraint'), { driverError: { code: '23503' } });
    };
    const progress = await runUntil(
      loop,
      () => loop.snapshot.failedAttempts >= 3 && sender.attempts.get('http://sub-1') === 3,
    );
    expect(progress.parked).toBe(0);
    expect(sender.attempts.get('http://sub-1')).toBe(3);
  });

  it('never skips the events a lagging subscription lacks when a faster one sets where the fetch starts', async () => {
    const { log, offsets, sender, loop } = setup([subscription('slow'), subscription('fast')]);
    const total = 400;
    for (let n = 0; n < total; n++) log.append(0, frame(n));
    // The slow sink answers one event at a time, slowly, so its buffer stays full while the fast one runs ahead.
    const send = sender.send.bind(sender);
    sender.send = async (target, f, id) => {
      if (target.sink === 'http://slow') await new Promise((r) => setTimeout(r, 1));
      return send(target, f, id);
    };

    await runUntil(
      loop,
      () => sender.idsFor('http://slow').length >= total && sender.idsFor('http://fast').length >= total,
    );

    expect(new Set(sender.idsFor('http://slow')).size).toBe(total);
    expect(sender.idsFor('http://slow')).toEqual(Array.from({ length: total }, (_, n) => `e-${n}`));
    expect(offsets.at('slow', 0)).toBe(total);
  });

  it('forgets parked copies of events it will replay from Kafka anyway (parked after the last commit)', async () => {
    const { log, retries, sender, loop } = setup();
    log.append(0, frame(1));
    await retries.park({
      subscriptionId: 'sub-1',
      topic: TOPIC,
      partition: 0,
      offset: 0,
      attributes: { id: 'e-1', source: '/t', type: 't', specversion: '1.0' },
      data: null,
      attempts: 3,
      lastError: 'HTTP 503',
      firstFailedAt: new Date(),
      nextAttemptAt: new Date(0),
      epoch: 0,
    });
    await runUntil(loop, (p) => p.delivered >= 1 && p.rounds > 1200 / 10);
    expect(sender.idsFor('http://sub-1')).toEqual(['e-1']);
    expect(retries.rows.size).toBe(0);
  });

  it('stops with FencedError when Postgres rejects its commit', async () => {
    const { log, offsets, loop } = setup();
    log.append(0, frame(1));
    offsets.rejectWith = 'STALE_EPOCH';
    await expect(runUntil(loop, () => false)).rejects.toBeInstanceOf(FencedError);
  });

  it('takes a commit behind the stored offset for what it is, not a fence: it keeps delivering and commits once past it', async () => {
    const { log, offsets, sender, loop } = setup();
    for (let n = 0; n < 6; n++) log.append(0, frame(n));
    const send = sender.send.bind(sender);
    sender.send = async (target, f, id) => {
      // Another writer (an operator, the subscription's previous instance) moved the stored offset on meanwhile.
      if (f.id === 'e-0')
        offsets.rows.set('sub-1#0', { subscriptionId: 'sub-1', topic: TOPIC, partition: 0, nextOffset: 4, epoch: 0 });
      // The lane stays behind the stored offset until it has tried to commit there.
      if (f.id === 'e-2')
        await waitFor('a commit behind the stored offset', () => offsets.refused.length > 0, {
          timeoutMs: 3000,
          intervalMs: 5,
        });
      return send(target, f, id);
    };
    const progress = await runUntil(loop, () => offsets.at('sub-1', 0) === 6);
    expect(offsets.refused.map((r) => [r.rejected, r.position.nextOffset, r.current?.nextOffset])).toEqual([
      ['BACKWARDS', 2, 4],
    ]);
    expect(progress.commitsBehind).toBe(1);
    expect(sender.idsFor('http://sub-1')).toEqual(['e-0', 'e-1', 'e-2', 'e-3', 'e-4', 'e-5']);
  });

  it('stops at its first refused write once a newer run holds the epoch, and moves nothing', async () => {
    const { log, offsets, sender, deadLetters, retries, fence, loop } = setup();
    for (let n = 0; n < 5; n++) log.append(0, frame(n));
    sender.failing.add('http://sub-1');
    // A newer attempt claims the epoch while this one is still retrying its first event.
    const send = sender.send.bind(sender);
    sender.send = async (target, f, id) => {
      if ((sender.attempts.get('http://sub-1') ?? 0) >= 1) fence.stale = true;
      return send(target, f, id);
    };
    const run = runUntil(loop, () => false);
    await expect(run).rejects.toBeInstanceOf(StaleEpochError);
    await run.catch((e: unknown) => expect(isFenced(e)).toBe(true));
    expect(fence.refused).toBeGreaterThanOrEqual(1);
    expect(retries.rows.size).toBe(0);
    expect(deadLetters.added).toEqual([]);
    expect(offsets.at('sub-1', 0)).toBe(0);
  });

  it('disables a subscription on a 410 only through the fence: in its transaction, and not at all once stale', async () => {
    const current = setup();
    current.log.append(0, frame(1));
    current.sender.answers.set('http://sub-1', { ok: false, status: 410, error: 'HTTP 410', gone: true });
    await runUntil(current.loop, (p) => current.disabled.length > 0 && p.subscriptions === 0);
    expect(current.disabledIn).toEqual([current.fence.manager]);

    const stale = setup();
    stale.log.append(0, frame(1));
    stale.sender.answers.set('http://sub-1', { ok: false, status: 410, error: 'HTTP 410', gone: true });
    const send = stale.sender.send.bind(stale.sender);
    stale.sender.send = async (target, f, id) => {
      stale.fence.stale = true;
      return send(target, f, id);
    };
    await expect(runUntil(stale.loop, () => false)).rejects.toBeInstanceOf(StaleEpochError);
    expect(stale.sender.attempts.get('http://sub-1')).toBe(1);
    expect(stale.disabled).toEqual([]);
  });
});

describe('DispatchLoop gate', () => {
  it('aborts a send in flight when its gate shuts', async () => {
    let open = true;
    const { log, sender, loop } = setup([subscription('sub-1')], 1000, 100, {}, () => open);
    log.append(0, frame(0));
    sender.holding.add('http://sub-1');
    const abort = new AbortController();
    const running = loop.run(abort.signal, Date.now() + 10000, () => undefined);
    const until = (what: string, done: () => boolean) => waitFor(what, done, { timeoutMs: 5000, intervalMs: 5 });
    try {
      await until('the send of e-0, held by the sink', () => sender.held.has('e-0'));
      const first = sender.signals.get('e-0')!;
      expect(first.aborted).toBe(false);
      open = false;
      await until('the send in flight aborted by the gate', () => first.aborted);
    } finally {
      open = true;
      for (const release of sender.held.values()) release();
      abort.abort();
      await running;
    }
  });

  it('gives the sends of a gate opened again a live signal at once, not after its next watch', async () => {
    // Only the gate's watch (an interval) is faked: it runs when the test says, so the reopened gate's first
    // sends come before any watch would have renewed the signal.
    jest.useFakeTimers({
      doNotFake: [
        'Date',
        'hrtime',
        'nextTick',
        'performance',
        'queueMicrotask',
        'setImmediate',
        'clearImmediate',
        'setTimeout',
        'clearTimeout',
      ],
    });
    let open = true;
    const { log, sender, loop } = setup([subscription('sub-1')], 1000, 100, {}, () => open);
    log.append(0, frame(0));
    sender.holding.add('http://sub-1');
    const abort = new AbortController();
    const running = loop.run(abort.signal, Date.now() + 10000, () => undefined);
    const until = (what: string, done: () => boolean) => waitFor(what, done, { timeoutMs: 5000, intervalMs: 5 });
    try {
      await until('the send of e-0, held by the sink', () => sender.held.has('e-0'));
      open = false;
      jest.advanceTimersByTime(100);
      expect(sender.signals.get('e-0')!.aborted).toBe(true);
      sender.holding.clear();
      for (const release of sender.held.values()) release();
      log.append(0, frame(1));
      open = true;
      await until(
        'e-1 delivered, or a send given an aborted signal',
        () => sender.idsFor('http://sub-1').includes('e-1') || sender.abortedAtStart.length > 0,
      );
      expect(sender.abortedAtStart).toEqual([]);
      expect(sender.idsFor('http://sub-1')).toContain('e-1');
    } finally {
      open = true;
      for (const release of sender.held.values()) release();
      abort.abort();
      await running;
      jest.useRealTimers();
    }
  });
});

describe('DispatchLoop bounds: circuit breaker, parking cap, ordered recovery, skipped ranges', () => {
  const SINK = 'http://sub-1';

  it('records a range deleted by retention before the lane moves past it, and counts it once', async () => {
    const { log, sender, skipped, loop } = setup();
    [1, 2, 3, 4, 5].forEach((n) => log.append(0, frame(n)));
    log.logStart = 3;
    const progress = await runUntil(loop, (p) => p.delivered >= 2);
    expect(sender.idsFor(SINK)).toEqual(['e-4', 'e-5']);
    // The fake log starts both partitions at 3 (the empty one too: its first three events are gone as well).
    expect([...skipped.ranges.values()].sort((a, b) => a.partition - b.partition)).toEqual([
      {
        subscriptionId: 'sub-1',
        topic: TOPIC,
        partition: 0,
        fromOffset: 0,
        toOffset: 3,
        reason: 'RETENTION',
        epoch: 0,
      },
      {
        subscriptionId: 'sub-1',
        topic: TOPIC,
        partition: 1,
        fromOffset: 0,
        toOffset: 3,
        reason: 'RETENTION',
        epoch: 0,
      },
    ]);
    expect(progress).toMatchObject({ skippedRanges: 2, skippedEvents: 6 });
  });

  it('opens the breaker of a failing sink: its lanes stop sending and parking, and one probe goes out per open period', async () => {
    const { log, sender, retries, loop } = setup(undefined, 1000, 100, {
      breaker: { failureThreshold: 3, openMs: 20, maxOpenMs: 40 },
    });
    for (let n = 0; n < 40; n++) log.append(n % 2, frame(n));
    sender.failing.add(SINK);
    const progress = await runUntil(loop, (p) => p.breakerOpenings >= 4);
    expect(progress.breakerOpenings).toBe(4);
    // Three failures open it; after that one probe per opening: without the breaker every event would be tried
    // three times and parked (about 120 attempts and 40 parked rows within these rounds).
    expect(sender.attempts.get(SINK)).toBeLessThanOrEqual(3 + 1 + 3);
    expect(retries.parks).toBeLessThanOrEqual(2);
    expect(progress.openBreakers).toBe(1);
  });

  it('holds a failing event at the head of its lane at the parking cap: nothing parked past the cap, none lost', async () => {
    const { log, offsets, sender, retries, loop } = setup(undefined, 1_000_000, 100, { maxParked: 3 });
    for (let n = 0; n < 20; n++) log.append(n % 2, frame(n));
    sender.failing.add(SINK);
    const held = await runUntil(loop, (p) => p.heldAtParkingCap >= 2);
    expect(retries.rows.size).toBe(3);
    expect(retries.refusedAtCap).toBeGreaterThanOrEqual(1);
    // Each lane's offset passed only the events it parked.
    expect((offsets.at('sub-1', 0) ?? 0) + (offsets.at('sub-1', 1) ?? 0)).toBe(3);
    expect(held.delivered).toBe(0);

    sender.failing.delete(SINK);
    await runUntil(loop, () => sender.idsFor(SINK).length >= 20 && retries.rows.size === 0);
    expect(new Set(sender.idsFor(SINK)).size).toBe(20);
    expect(offsets.at('sub-1', 0)).toBe(10);
    expect(offsets.at('sub-1', 1)).toBe(10);
  });

  it("drains the parked backlog first, in offset order, at the sink's pace, when the breaker closes", async () => {
    // The breaker opens at the 7th failure in a row: the first two events are parked by then (3 attempts each).
    const { log, sender, retries, loop } = setup(undefined, 1000, 100, {
      breaker: { failureThreshold: 7, openMs: 20, maxOpenMs: 20 },
    });
    for (let n = 1; n <= 6; n++) log.append(0, frame(n));
    sender.failing.add(SINK);
    let parkedWhenOpened: number[] | undefined;
    const progress = await runUntil(loop, (p) => {
      if (p.breakerOpenings >= 1 && !parkedWhenOpened) {
        // The sink comes back while the breaker is open (within the same run).
        parkedWhenOpened = [...retries.rows.values()].map((r) => r.offset);
        sender.failing.delete(SINK);
      }
      return sender.idsFor(SINK).length >= 6;
    });
    expect(parkedWhenOpened).toEqual([0, 1]);
    // Parked ones before newer ones, in offset order, and not waiting for the one-per-second sweep.
    expect(sender.idsFor(SINK)).toEqual(['e-1', 'e-2', 'e-3', 'e-4', 'e-5', 'e-6']);
    expect(progress.recovered).toBe(2);
    expect(retries.rows.size).toBe(0);
  });

  it("delivers a lane's parked backlog first when a run starts (parked ones before newer ones across restarts)", async () => {
    const { log, sender, retries, offsets, loop } = setup();
    for (let n = 1; n <= 4; n++) log.append(0, frame(n));
    // e-1 and e-2 were parked by an earlier run, which committed past them; not due for a minute.
    const parkedAt = (offset: number): ParkedDelivery => ({
      subscriptionId: 'sub-1',
      topic: TOPIC,
      partition: 0,
      offset,
      attributes: { id: `e-${offset + 1}`, source: '/t', type: 't', specversion: '1.0' },
      data: Buffer.from(String(offset + 1)),
      attempts: 3,
      lastError: 'HTTP 503',
      firstFailedAt: new Date(),
      nextAttemptAt: new Date(Date.now() + 60_000),
      epoch: 0,
    });
    await retries.park(parkedAt(0));
    await retries.park(parkedAt(1));
    offsets.rows.set('sub-1#0', { subscriptionId: 'sub-1', topic: TOPIC, partition: 0, nextOffset: 2, epoch: 0 });
    const progress = await runUntil(loop, () => sender.idsFor(SINK).length >= 4);
    expect(sender.idsFor(SINK)).toEqual(['e-1', 'e-2', 'e-3', 'e-4']);
    expect(progress.recovered).toBe(2);
  });
});

describe('DispatchLoop ordering', () => {
  /** An event of partition key `key`; its id names both. */
  const keyed = (key: string, n: number): EventFrame => ({
    id: `${key}-${n}`,
    source: '/t',
    type: 't',
    extensions: { partitionkey: key },
    data: Buffer.from(String(n)),
  });
  const ordered = (id: string, ordering: 'key' | 'none', concurrency?: number) =>
    ({
      ...subscription(id),
      config: { ordering, ...(concurrency ? { concurrency } : {}) },
    }) as unknown as SubscriptionEntity;
  const until = (what: string, done: () => boolean) => waitFor(what, done, { timeoutMs: 5000, intervalMs: 5 });
  const idsOfKey = (ids: string[], key: string) => ids.filter((id) => id.startsWith(`${key}-`));

  it('key: delivers different keys of a partition at once, up to the concurrency, and each key in order', async () => {
    const { log, offsets, sender, loop } = setup([ordered('k', 'key', 4)]);
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
    for (let n = 0; n < 3; n++) for (const key of keys) log.append(0, keyed(key, n));
    sender.holding.add('http://k');
    const abort = new AbortController();
    const running = loop.run(abort.signal, Date.now() + 10000, () => undefined);
    try {
      // Four keys out at once (the concurrency), each with its first event only: a key's next waits behind it.
      await until('four deliveries out', () => sender.held.size === 4);
      expect([...sender.held.keys()].sort()).toEqual(['a-0', 'b-0', 'c-0', 'd-0']);
      await until('the rest', () => {
        for (const release of sender.held.values()) release();
        return sender.idsFor('http://k').length === 18;
      });
      expect(sender.maxHeld).toBe(4);
      for (const key of keys)
        expect(idsOfKey(sender.idsFor('http://k'), key)).toEqual([0, 1, 2].map((n) => `${key}-${n}`));
      await until('a commit over all 18', () => offsets.at('k', 0) === 18);
    } finally {
      for (const release of sender.held.values()) release();
      abort.abort();
      await running;
    }
  });

  it('key and none: the committed offset is the lowest one not settled, whatever settled after it', async () => {
    for (const ordering of ['key', 'none'] as const) {
      const { log, offsets, sender, loop } = setup([ordered('k', ordering)]);
      for (let n = 0; n < 6; n++) log.append(0, keyed(`k${n}`, n));
      log.append(1, keyed('p1', 0));
      sender.holding.add('http://k');
      const abort = new AbortController();
      const running = loop.run(abort.signal, Date.now() + 10000, () => undefined);
      try {
        await until('six deliveries of partition 0 out, and partition 1', () => sender.held.size === 7);
        // Offsets 0..1 and 3..5 settle; 2 is still out. A commit that moved partition 1 shows partition 0 at 2.
        for (const id of ['k0-0', 'k1-1', 'k3-3', 'k4-4', 'k5-5']) sender.held.get(id)!();
        await until('five delivered', () => sender.idsFor('http://k').length === 5);
        sender.held.get('p1-0')!();
        await until('a commit of partition 1', () => offsets.at('k', 1) === 1);
        expect(offsets.at('k', 0)).toBe(2);
        sender.held.get('k2-2')!();
        await until(`${ordering}: a commit over all six`, () => offsets.at('k', 0) === 6);
      } finally {
        for (const release of sender.held.values()) release();
        abort.abort();
        await running;
      }
    }
  });

  it('key: a failing key is parked alone; its later events are parked behind it, in order, and other keys go on', async () => {
    const { log, offsets, sender, retries, loop } = setup([ordered('k', 'key')]);
    for (let n = 0; n < 4; n++) {
      log.append(0, keyed('bad', n));
      log.append(0, keyed('good', n));
    }
    // bad-0 fails 5 times: 3 in the lane, then parked; it succeeds on its 6th attempt, from the retry table.
    sender.failIds.set('bad-0', 5);
    let parkedRows: number[] | undefined;
    let goodWhenParked: string[] | undefined;
    const progress = await runUntil(loop, (p) => {
      if (!parkedRows && (p.parkedBehind ?? 0) >= 3) {
        parkedRows = [...retries.rows.values()].map((r) => r.offset).sort((a, b) => a - b);
        goodWhenParked = idsOfKey(sender.idsFor('http://k'), 'good');
      }
      return sender.idsFor('http://k').length === 8 && offsets.at('k', 0) === 8;
    });
    // The key's later events were never attempted before bad-0 was delivered: parked behind it without an attempt.
    expect(parkedRows).toEqual([0, 2, 4, 6]);
    expect(progress.parked).toBe(1);
    expect(progress.parkedBehind).toBe(3);
    expect(goodWhenParked).toEqual(['good-0', 'good-1', 'good-2', 'good-3']);
    expect(sender.times.get('bad-1')!.length).toBe(1);
    expect(sender.tried.indexOf('bad-1')).toBeGreaterThan(sender.tried.lastIndexOf('bad-0'));
    expect(idsOfKey(sender.idsFor('http://k'), 'bad')).toEqual(['bad-0', 'bad-1', 'bad-2', 'bad-3']);
    expect(retries.rows.size).toBe(0);
  });

  it('key: parked deliveries of an earlier run are loaded as held keys; their keys wait, the others do not', async () => {
    const { log, sender, retries, offsets, loop } = setup([ordered('k', 'key')]);
    for (const [key, n] of [
      ['a', 0],
      ['b', 0],
      ['a', 1],
      ['b', 1],
    ] as const)
      log.append(0, keyed(key, n));
    // a-0 was parked by an earlier run, which committed past it: a-1 (offset 2) comes after it.
    const f = keyed('a', 0);
    await retries.park({
      subscriptionId: 'k',
      topic: TOPIC,
      partition: 0,
      offset: 0,
      attributes: { id: f.id, source: f.source, type: f.type, specversion: '1.0', partitionkey: 'a' },
      data: f.data!,
      attempts: 3,
      lastError: 'HTTP 503',
      firstFailedAt: new Date(),
      nextAttemptAt: new Date(Date.now() + 60_000),
      epoch: 0,
    });
    offsets.rows.set('k#0', { subscriptionId: 'k', topic: TOPIC, partition: 0, nextOffset: 1, epoch: 0 });
    sender.failIds.set('a-0', 2);
    const progress = await runUntil(loop, () => sender.idsFor('http://k').length === 4);
    expect(idsOfKey(sender.idsFor('http://k'), 'a')).toEqual(['a-0', 'a-1']);
    expect(idsOfKey(sender.idsFor('http://k'), 'b')).toEqual(['b-0', 'b-1']);
    // b went on while a-0 was retried: both of b before a-0's third attempt.
    expect(sender.tried.indexOf('b-1')).toBeLessThan(sender.tried.lastIndexOf('a-0'));
    expect(progress.recovered).toBe(2);
    expect(progress.parkedBehind).toBe(1);
  });

  it('none: a failing event holds nothing else of its partition', async () => {
    const { log, offsets, sender, loop } = setup([ordered('k', 'none')]);
    for (let n = 0; n < 5; n++) log.append(0, keyed('x', n));
    sender.failIds.set('x-0', 2);
    await runUntil(loop, () => sender.idsFor('http://k').length === 5 && offsets.at('k', 0) === 5);
    const order = sender.idsFor('http://k');
    expect(order.slice(0, 4)).toEqual(['x-1', 'x-2', 'x-3', 'x-4']);
    expect(order[4]).toBe('x-0');
  });
});

import type { Kafka, Producer } from 'kafkajs';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { Deliverer, DispatchLoop, DispatchProgress, isFenced, WebhookSender } from '@libs/delivery';
import { frameToKafkaMessage } from '@libs/frame';
import { PartitionReader, TopicAdmin } from '@libs/kafka';
import {
  DeadLetterEntity,
  DeadLetterStore,
  DeliveryRetryEntity,
  DispatchRunStore,
  OffsetStore,
  RetryStore,
  SubscriptionEntity,
  SkippedRangeStore,
} from '@libs/storage';
import { StaleEpochError, WriteFence } from '@libs/fence';
import { SubscriptionService } from '@libs/subscriptions';
import { DeliveryStack, openDeliveryStack } from '../support/delivery-stack';
import { uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * The real dispatch loop of LOCAL_STICKY_PULL against real Postgres stores, real Kafka and a webhook sink on
 * loopback, with its writes fenced by the instance's dispatch run (DispatchRunStore): what two loops of one
 * instance running at once (an attempt Temporal replaced, still working) can and cannot do.
 */
describe('DispatchLoop under a dispatch-run fence (real Postgres, Kafka and sink)', () => {
  const topic = uniqueTopic('loop');
  let stack: DeliveryStack;
  let db: DataSource;
  let kafka: Kafka;
  let producer: Producer;
  let topics: TopicAdmin;
  const readers: PartitionReader[] = [];
  let webhooks: WebhookSender;
  let runs: DispatchRunStore;
  let offsets: OffsetStore;
  let deadLetters: DeadLetterStore;
  let retries: RetryStore;
  let subscriptions: SubscriptionService;
  const receivers: WebhookReceiver[] = [];

  beforeAll(async () => {
    stack = await openDeliveryStack('dispatch-loop-spec', topic, 2, 2000);
    ({ db, kafka, producer, topics, webhooks, runs, offsets, deadLetters, retries, subscriptions } = stack);
  });

  afterAll(async () => {
    for (const r of receivers) await r.stop();
    for (const r of readers) await r.disconnect().catch(() => undefined);
    await stack.close();
  });

  async function receiver(): Promise<WebhookReceiver> {
    const r = new WebhookReceiver();
    await r.start();
    receivers.push(r);
    return r;
  }

  /** An instance of its own with one webhook subscription on the topic. */
  async function instanceWithSubscription(retry: { maxAttempts: number }) {
    const instanceId = `loop-${randomUUID().slice(0, 8)}`;
    const id = randomUUID();
    await db.manager.insert(SubscriptionEntity, {
      id,
      topic,
      protocol: 'HTTP',
      sink: 'http://127.0.0.1:9/unused',
      instanceId,
      status: 'ACTIVE',
      config: { retry: { initialDelayMs: 10, maxDelayMs: 20, ...retry } },
    });
    // The subscription starts at the end of the log, as one created now does.
    const ends = await topics.endOffsets(topic);
    await offsets.commit(
      [...ends].map(([partition, nextOffset]) => ({ subscriptionId: id, topic, partition, nextOffset, epoch: 0 })),
    );
    return { instanceId, id, ends };
  }

  async function publish(ids: string[]): Promise<void> {
    await producer.send({
      topic,
      acks: -1,
      messages: ids.map((id, i) => ({
        ...frameToKafkaMessage({
          id,
          source: '/loop-spec',
          type: 'spec',
          extensions: {},
          data: Buffer.from(id),
        }),
        partition: i % 2,
      })),
    });
  }

  /** A write the loop made through its fence: whether it finished, and whether it went through. */
  type FencedWrite = { done: boolean; ok: boolean };
  type Outcome = { ok: true; progress: DispatchProgress } | { ok: false; error: unknown } | { ok: 'still running' };
  const started: { stop(): void; outcome: Promise<Outcome> }[] = [];

  /** What the loop's run came to, or 'still running' after `ms`. */
  const within = (ms: number, outcome: Promise<Outcome>): Promise<Outcome> =>
    Promise.race([
      outcome,
      new Promise<Outcome>((resolve) => setTimeout(() => resolve({ ok: 'still running' }), ms).unref()),
    ]);

  afterEach(async () => {
    for (const loop of started.splice(0)) {
      loop.stop();
      await within(20000, loop.outcome);
    }
  });

  /**
   * The writes of a loop from `from` on (its count of writes when a claim resolved: each of those started after
   * the claim committed), once one of them finished. Bounded at 30 s: a CI run on a loaded host passed 10 s here.
   */
  const writesAfter = (writes: FencedWrite[], from: number) =>
    waitFor(
      'the loop to try a write after the claim',
      () => {
        const after = writes.slice(from);
        return after.some((w) => w.done) && after;
      },
      { timeoutMs: 30000, intervalMs: 20 },
    );

  /** A loop of the instance under `epoch`, delivering to `sink`, with a record of its fenced writes. */
  async function loopOf(
    instanceId: string,
    epoch: number,
    sink: WebhookReceiver,
    fenceFor = (e: number) => runs.fenceFor(instanceId, e),
  ) {
    const reader = new PartitionReader(kafka);
    await reader.connect();
    readers.push(reader);
    const inner = fenceFor(epoch);
    const writes: FencedWrite[] = [];
    const fence: WriteFence = {
      epoch: inner.epoch,
      rowEpoch: inner.rowEpoch,
      run: async (work) => {
        const write = { done: false, ok: false };
        writes.push(write);
        try {
          const result = await inner.run(work);
          write.ok = true;
          return result;
        } finally {
          write.done = true;
        }
      },
    };
    // Every loop of the instance delivers to the same subscription; each through its own receiver, so the test
    // knows which loop sent what.
    const sender: Deliverer = {
      send: (target, frame, messageId, signal) =>
        webhooks.send({ ...target, sink: sink.url! }, frame, messageId, signal),
    };
    const loop = new DispatchLoop({
      instanceId,
      subscriptions,
      offsets,
      deadLetters,
      retries,
      skipped: new SkippedRangeStore(db),
      reader,
      topics,
      sender,
      fence,
      options: {
        pollMaxWaitMs: 100,
        batchMaxEvents: 100,
        refreshIntervalMs: 200,
        retryInitialMs: 10,
        retryMaxMs: 20,
        maxAttempts: 4,
      },
    });
    const stop = new AbortController();
    let progress: DispatchProgress | undefined;
    const running = loop.run(stop.signal, Date.now() + 30000, (p) => (progress = p));
    // Observed at once, so a rejection before the test awaits it is not unhandled.
    const outcome = running.then(
      (p): Outcome => ({ ok: true, progress: p }),
      (e: unknown): Outcome => ({ ok: false, error: e }),
    );
    let ended: Outcome | undefined;
    void outcome.then((o) => (ended = o));
    const handle = { loop, writes, stop: () => stop.abort(), outcome, progress: () => progress, ended: () => ended };
    started.push(handle);
    return handle;
  }

  /**
   * A sink that answers 2xx, except the `failing` events (always 500) and the `flaky` ones (500 for their first
   * attempts); `delivered` collects the events it acknowledged. The receiver answers in the order requests came
   * (each waits on the same gate and delay), so the answers are decided on arrival and queued.
   */
  function answering(r: WebhookReceiver, failing: Set<string>, flaky: Map<string, number>, delivered: Set<string>) {
    const answers: number[] = [];
    r.onEvent = (request) => {
      const id = String(request.headers['ce-id']);
      const left = flaky.get(id) ?? 0;
      if (left > 0) flaky.set(id, left - 1);
      const code = failing.has(id) || left > 0 ? 500 : 200;
      if (code === 200) delivered.add(id);
      answers.push(code);
    };
    r.status = () => answers.shift() ?? 500;
  }

  it('lets only the newest of two loops of one instance write, and every event ends delivered, parked or dead-lettered', async () => {
    const { instanceId, id, ends } = await instanceWithSubscription({ maxAttempts: 4 });
    const events = Array.from({ length: 40 }, (_, n) => `ev-${n}-${randomUUID().slice(0, 6)}`);
    const failing = new Set([events[5], events[22]]);
    const flaky = new Map([
      [events[9], 3],
      [events[30], 3],
    ]);
    const delivered = new Set<string>();
    const sinkA = await receiver();
    const sinkB = await receiver();
    answering(sinkA, failing, flaky, delivered);
    answering(sinkB, failing, flaky, delivered);

    const epochA = await runs.claim(instanceId, 'attempt 1');
    const a = await loopOf(instanceId, epochA, sinkA);
    await publish(events.slice(0, 20));
    // A works on: it delivered some events, then its sink holds the answers, as a stalled attempt would.
    await waitFor('loop A to deliver some events', () => delivered.size >= 8);
    let release!: () => void;
    sinkA.gate = new Promise<void>((resolve) => (release = resolve));
    const heldFrom = sinkA.requests.length;
    await publish(events.slice(20));
    await waitFor('loop A to wait on its sink', () => sinkA.requests.length > heldFrom);

    // Temporal starts a new attempt while A still runs: it claims a newer epoch, and its loop starts.
    const epochB = await runs.claim(instanceId, 'attempt 2');
    const claimedAt = a.writes.length;
    const b = await loopOf(instanceId, epochB, sinkB);
    release();

    // A's first refusal stops it. That refused write may have started before the claim committed (it waited on the
    // row lock the claim held), so A need not start one after it; whatever A started after the claim was refused.
    const outcomeA = await within(30000, a.outcome);
    expect(a.writes.slice(claimedAt).filter((w) => w.ok)).toEqual([]);
    expect(a.writes.some((w) => w.done && !w.ok)).toBe(true);
    expect(outcomeA.ok).toBe(false);
    const errorA = (outcomeA as { error: unknown }).error;
    expect(isFenced(errorA)).toBe(true);
    expect(errorA).toBeInstanceOf(StaleEpochError);
    expect((errorA as Error).message).toContain(
      `the dispatch run of instance ${instanceId} is held under epoch ${epochB}`,
    );

    // B settles everything: each event delivered or dead-lettered, nothing left parked, offsets at the end.
    const letters = async () =>
      (await db.manager.find(DeadLetterEntity, { where: { subscriptionId: id } })).map((l) => l.eventId);
    const parked = async () =>
      (await db.manager.find(DeliveryRetryEntity, { where: { subscriptionId: id } })).map((r) =>
        String((r.attributes as { id: string }).id),
      );
    const end = (p: number) => ends.get(p)! + events.length / 2;
    await waitFor(
      'every event delivered or dead-lettered, and the offsets at the end',
      async () => {
        const positions = await offsets.positionsOf([id]);
        return (
          (await parked()).length === 0 &&
          new Set(await letters()).size === failing.size &&
          positions.every((p) => p.nextOffset === end(p.partition)) &&
          events.every((e) => failing.has(e) || delivered.has(e))
        );
      },
      { timeoutMs: 30000, intervalMs: 200 },
    );
    b.stop();
    const outcomeB = await within(20000, b.outcome);
    expect(outcomeB.ok).toBe(true);

    const dead = new Set(await letters());
    const stillParked = new Set(await parked());
    const neither = events.filter((e) => !delivered.has(e) && !dead.has(e) && !stillParked.has(e));
    expect({ neither, dead: [...dead].sort(), parked: [...stillParked] }).toEqual({
      neither: [],
      dead: [...failing].sort(),
      parked: [],
    });
    expect((await runs.get(instanceId))?.rejectedWrites).toBeGreaterThanOrEqual(1);
    expect(b.writes.every((w) => w.ok)).toBe(true);
  });

  /**
   * A loop of an old epoch with one answer of its sink held; a newer run claims the epoch; the answer is let go.
   * Whatever the loop then writes must be refused.
   */
  async function staleLoopAfterAnswer(status: number, retry: { maxAttempts: number }, failFirst = 0) {
    const { instanceId, id, ends } = await instanceWithSubscription(retry);
    const sink = await receiver();
    let failures = failFirst;
    sink.status = () => (failures-- > 0 ? 500 : status);
    const epoch = await runs.claim(instanceId, 'attempt 1');
    const old = await loopOf(instanceId, epoch, sink);
    let release!: () => void;
    // The last answer before the write under test is held.
    const holdAt = failFirst + 1;
    const waiting = new Promise<void>((resolve) => (release = resolve));
    sink.onEvent = () => {
      if (sink.requests.length === holdAt) sink.gate = waiting;
    };
    const event = `ev-${randomUUID().slice(0, 8)}`;
    await publish([event]);
    await waitFor('the held answer', () => sink.requests.length === holdAt);
    await runs.claim(instanceId, 'attempt 2');
    const claimedAt = old.writes.length;
    release();
    // Whatever the old loop writes after the claim is refused, and the first refusal stops it.
    const refused = await writesAfter(old.writes, claimedAt).catch((e: Error) => {
      throw new Error(
        `${e.message}; the old loop: ${JSON.stringify({ writes: old.writes, claimedAt, requests: sink.requests.length, progress: old.progress(), ended: String((old.ended() as { error?: unknown })?.error ?? old.ended()?.ok) })}`,
      );
    });
    expect(refused.filter((w) => w.ok)).toEqual([]);
    const outcome = await within(10000, old.outcome);
    return { instanceId, id, ends, event, outcome, sink };
  }

  it('refuses an old loop its commit after a newer run claimed the epoch', async () => {
    const { id, ends, outcome, sink } = await staleLoopAfterAnswer(200, { maxAttempts: 4 });
    expect(sink.requests).toHaveLength(1);
    expect(outcome.ok).toBe(false);
    expect((outcome as { error: unknown }).error).toBeInstanceOf(StaleEpochError);
    expect((await offsets.positionsOf([id])).map((p) => [p.partition, p.nextOffset]).sort()).toEqual([...ends].sort());
  });

  it('refuses an old loop its parking after a newer run claimed the epoch', async () => {
    const { id, outcome, sink } = await staleLoopAfterAnswer(500, { maxAttempts: 10 }, 2);
    expect(sink.requests).toHaveLength(3);
    expect((outcome as { error: unknown }).error).toBeInstanceOf(StaleEpochError);
    expect(await db.manager.count(DeliveryRetryEntity, { where: { subscriptionId: id } })).toBe(0);
  });

  it('refuses an old loop its dead letter after a newer run claimed the epoch', async () => {
    const { id, outcome, sink } = await staleLoopAfterAnswer(500, { maxAttempts: 1 });
    expect(sink.requests).toHaveLength(1);
    expect((outcome as { error: unknown }).error).toBeInstanceOf(StaleEpochError);
    expect(await db.manager.count(DeadLetterEntity, { where: { subscriptionId: id } })).toBe(0);
  });

  it("disables a subscription on a sink's 410 only through the fence: a stale loop's 410 changes nothing", async () => {
    const stale = await staleLoopAfterAnswer(410, { maxAttempts: 4 });
    expect(stale.sink.requests).toHaveLength(1);
    expect((stale.outcome as { error: unknown }).error).toBeInstanceOf(StaleEpochError);
    expect((await db.manager.findOneByOrFail(SubscriptionEntity, { id: stale.id })).status).toBe('ACTIVE');

    // The same 410 to the loop of the current epoch disables the subscription.
    const { instanceId, id } = await instanceWithSubscription({ maxAttempts: 4 });
    const sink = await receiver();
    sink.status = () => 410;
    const current = await loopOf(instanceId, await runs.claim(instanceId, 'attempt 1'), sink);
    await publish([`ev-${randomUUID().slice(0, 8)}`]);
    await waitFor(
      'the subscription disabled',
      async () => (await db.manager.findOneByOrFail(SubscriptionEntity, { id })).status === 'DISABLED',
    );
    current.stop();
    expect((await within(20000, current.outcome)).ok).toBe(true);
  });
});

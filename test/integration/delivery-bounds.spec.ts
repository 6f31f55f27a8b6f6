import { randomUUID } from 'node:crypto';
import type { Producer } from 'kafkajs';
import { DispatchLoop, DispatchLoopOptions, DispatchProgress, WebhookSender } from '@libs/delivery';
import { frameToKafkaMessage } from '@libs/frame';
import { createKafka, PartitionReader } from '@libs/kafka';
import { closeDependencies, connectDependencies, Dependencies } from '@libs/runtime';
import {
  DeadLetterStore,
  DispatchRunStore,
  OffsetStore,
  RetryStore,
  SkippedRangeStore,
  SubscriptionEntity,
} from '@libs/storage';
import { testConfig, uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

const PARTITIONS = 3;
const EVENTS = 60;

/**
 * The bounds of delivery to a sink that is down, with the real loop against real Postgres and Kafka: the retry
 * table stays bounded (the breaker stops the lanes; the cap holds events in their lanes), and when the sink
 * returns every event arrives, parked ones before newer ones in each partition, none lost.
 */
describe('delivery to a sink that is down (real loop, Postgres, Kafka)', () => {
  const topic = uniqueTopic('bounds');
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `bounds-${randomUUID().slice(0, 8)}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(PARTITIONS),
  });
  let deps: Dependencies;
  let producer: Producer;
  let reader: PartitionReader;
  const receivers: WebhookReceiver[] = [];
  const stops: AbortController[] = [];
  const loops: Promise<unknown>[] = [];

  beforeAll(async () => {
    deps = await connectDependencies(config, 'bounds-spec');
    producer = createKafka(config.kafka, 'bounds-spec').producer();
    await producer.connect();
    reader = new PartitionReader(deps.kafka);
    await reader.connect();
  });
  afterAll(async () => {
    stops.forEach((s) => s.abort());
    await Promise.allSettled(loops);
    await Promise.all(receivers.map((r) => r.stop()));
    await reader?.disconnect();
    await producer?.disconnect();
    if (deps) await closeDependencies(deps);
  });

  /** A subscription (from offset 0 of every partition) whose sink answers what `receiver.status` says. */
  async function subscriptionTo(receiver: WebhookReceiver): Promise<SubscriptionEntity> {
    const id = randomUUID();
    await deps.db.manager.insert(SubscriptionEntity, {
      id,
      topic,
      protocol: 'HTTP',
      sink: receiver.url!,
      instanceId: config.instance.id,
      status: 'ACTIVE',
    });
    return (await deps.db.manager.findOneBy(SubscriptionEntity, { id }))!;
  }

  /** Publishes `EVENTS` events, each partition in order, ids `<run>-<partition>-<seq>`. */
  async function publish(run: string): Promise<void> {
    for (let seq = 0; seq < EVENTS / PARTITIONS; seq++) {
      await producer.send({
        topic,
        acks: -1,
        messages: Array.from({ length: PARTITIONS }, (_, partition) => ({
          partition,
          ...frameToKafkaMessage({
            id: `${run}-${partition}-${seq}`,
            source: '/bounds',
            type: 'bounds',
            extensions: {},
            data: Buffer.from(String(seq)),
          }),
        })),
      });
    }
  }

  /** Runs a real dispatch loop (fenced by a claimed dispatch run) for `subscription` until the test ends. */
  async function startLoop(
    subscription: SubscriptionEntity,
    bounds: Partial<DispatchLoopOptions>,
  ): Promise<{ progress: () => DispatchProgress; done: Promise<unknown> }> {
    const runs = new DispatchRunStore(deps.db);
    const instance = `${config.instance.id}-${subscription.id.slice(0, 8)}`;
    const epoch = await runs.claim(instance, 'bounds-spec');
    const retries = new RetryStore(deps.db, new DeadLetterStore(deps.db));
    const loop = new DispatchLoop({
      instanceId: instance,
      subscriptions: { activeFor: async () => [subscription], disable: async () => undefined },
      offsets: new OffsetStore(deps.db),
      deadLetters: new DeadLetterStore(deps.db),
      retries,
      skipped: new SkippedRangeStore(deps.db),
      reader,
      topics: deps.topics,
      sender: WebhookSender.forInstance(testConfig({ EVENTMESH_DELIVERY_WEBHOOK_TIMEOUT_MS: '2000' })),
      options: {
        pollMaxWaitMs: 100,
        batchMaxEvents: 100,
        refreshIntervalMs: 500,
        retryInitialMs: 40,
        retryMaxMs: 200,
        maxAttempts: 1000,
        ...bounds,
      },
      fence: runs.fenceFor(instance, epoch),
    });
    const stop = new AbortController();
    stops.push(stop);
    let last = loop.snapshot;
    const done = loop.run(stop.signal, Date.now() + 120_000, (p) => (last = p));
    loops.push(done);
    return { progress: () => last, done };
  }

  const parkedRows = async (id: string) =>
    Number((await deps.db.query('SELECT count(*) AS n FROM delivery_retries WHERE subscription_id = $1', [id]))[0].n);

  /** Samples the parked rows of a subscription every 50 ms; `max()` is the most seen. */
  function sampleParked(id: string) {
    let max = 0;
    const timer = setInterval(() => void parkedRows(id).then((n) => (max = Math.max(max, n))), 50);
    return { max: () => max, stop: () => clearInterval(timer) };
  }

  /**
   * The sink comes back. None lost: every partition's offset reaches its end with nothing left parked and nothing
   * dead-lettered (an offset passes only events the sink acknowledged, parked or dead-lettered). With `inOrder`,
   * in each partition the events the sink got from then on arrive in offset order: the parked ones first.
   */
  async function expectAllDelivered(
    receiver: WebhookReceiver,
    subscription: SubscriptionEntity,
    run: string,
    inOrder: boolean,
    progress: () => DispatchProgress,
  ) {
    // The topic holds the events of earlier tests too; a subscription reads it from offset 0.
    const end = [...(await deps.topics.endOffsets(topic)).values()].reduce((a, b) => a + b, 0);
    const backAt = Date.now();
    receiver.status = () => 200;
    const committed = async () =>
      Number(
        (
          await deps.db.query(
            'SELECT coalesce(sum(next_offset), 0) AS n FROM subscription_offsets WHERE subscription_id = $1',
            [subscription.id],
          )
        )[0].n,
      );
    await waitFor(
      'every partition to be committed to its end, nothing parked',
      async () => {
        const [offsets, parked] = [await committed(), await parkedRows(subscription.id)];
        if (offsets === end && parked === 0) return true;
        throw new Error(`committed ${offsets} of ${end}, ${parked} parked; progress ${JSON.stringify(progress())}`);
      },
      { timeoutMs: 60_000 },
    );
    const [{ n: letters }] = await deps.db.query(
      'SELECT count(*)::int AS n FROM dead_letters WHERE subscription_id = $1',
      [subscription.id],
    );
    expect(letters).toBe(0);
    const ids = new Set(receiver.requests.map((r) => String(r.headers['ce-id'])));
    expect(
      Array.from({ length: EVENTS }, (_, i) => `${run}-${i % PARTITIONS}-${Math.floor(i / PARTITIONS)}`).filter(
        (id) => !ids.has(id),
      ),
    ).toEqual([]);
    if (!inOrder) return;
    for (let partition = 0; partition < PARTITIONS; partition++) {
      const seqs = receiver.requests
        .filter((r) => r.receivedAt >= backAt && String(r.headers['ce-id']).startsWith(`${run}-${partition}-`))
        .map((r) => Number(String(r.headers['ce-id']).split('-').pop()));
      const firsts = seqs.filter((s, i) => seqs.indexOf(s) === i);
      expect(firsts.length).toBeGreaterThan(0);
      expect(firsts).toEqual([...firsts].sort((a, b) => a - b));
    }
  }

  async function receiverDown(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    receivers.push(receiver);
    receiver.status = () => 503;
    await receiver.start();
    return receiver;
  }

  it('opens the breaker of a sink that is down: the retry table stays bounded, then every event arrives in order', async () => {
    const receiver = await receiverDown();
    const subscription = await subscriptionTo(receiver);
    const run = `breaker-${randomUUID().slice(0, 4)}`;
    // Eight failures in a row open it: by then the lanes' first events failed three times each, and some are parked.
    const loop = await startLoop(subscription, { breaker: { failureThreshold: 8, openMs: 200, maxOpenMs: 800 } });
    const parked = sampleParked(subscription.id);
    await publish(run);
    // Four openings: the first after eight failures, then one failed probe each (200, 400, 800 ms...).
    await waitFor('the breaker to open four times', () => loop.progress().breakerOpenings >= 4, { timeoutMs: 60_000 });
    const attemptsWhileDown = receiver.requests.length;
    const parkedWhenBack = await parkedRows(subscription.id);
    parked.stop();
    // Without the breaker each event is attempted three times and parked: 180 attempts, 60 rows.
    expect(attemptsWhileDown).toBeLessThanOrEqual(8 + PARTITIONS + 3);
    expect(parked.max()).toBeLessThanOrEqual(PARTITIONS + 3);
    expect(loop.progress().openBreakers).toBe(1);
    // Some are parked, so the order below shows the parked ones went first.
    expect(parkedWhenBack).toBeGreaterThan(0);

    await expectAllDelivered(receiver, subscription, run, true, loop.progress);
  }, 180_000);

  it('holds events in their lanes at the parking cap: parked rows never pass it, then every event arrives, none lost', async () => {
    const CAP = 5;
    const receiver = await receiverDown();
    const subscription = await subscriptionTo(receiver);
    const run = `cap-${randomUUID().slice(0, 4)}`;
    // No breaker to speak of: only the cap bounds the table.
    const loop = await startLoop(subscription, {
      breaker: { failureThreshold: 100_000, openMs: 200, maxOpenMs: 200 },
      maxParked: CAP,
    });
    const parked = sampleParked(subscription.id);
    await publish(run);
    await waitFor(
      'lanes to hold failing events at the cap',
      async () => {
        if (loop.progress().heldAtParkingCap >= PARTITIONS) return true;
        throw new Error(`${await parkedRows(subscription.id)} parked; progress ${JSON.stringify(loop.progress())}`);
      },
      { timeoutMs: 60_000 },
    );
    const rowsAtCap = await parkedRows(subscription.id);
    parked.stop();
    expect(rowsAtCap).toBe(CAP);
    expect(parked.max()).toBeLessThanOrEqual(CAP);
    // The offsets passed only the parked events: the held ones and everything after them wait in Kafka.
    const committed = await deps.db.query(
      'SELECT coalesce(sum(next_offset), 0)::int AS n FROM subscription_offsets WHERE subscription_id = $1',
      [subscription.id],
    );
    expect(committed[0].n).toBeLessThanOrEqual(CAP);
    expect(loop.progress().delivered).toBe(0);

    await expectAllDelivered(receiver, subscription, run, false, loop.progress);
  }, 180_000);
});

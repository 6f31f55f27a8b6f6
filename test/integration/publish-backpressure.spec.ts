import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Kafka } from 'kafkajs';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { createKafka, PartitionReader, ProducerDepth, TopicAdmin } from '@libs/kafka';
import { kafkaFaultListener, testConfig, uniqueTopic } from '../support/env';
import { TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait-for';

/** The broker's fault-test listener, and the port it advertises (where the proxy listens). */
const { port: FAULT_LISTENER, advertisedPort: ADVERTISED } = kafkaFaultListener();

/**
 * Long enough that the held publishes reach the producer well before the first of them times out: the cases need
 * them all held and unanswered at once (a CI run on a loaded host took over 1.5 s to post 200, and others, three
 * test lanes on 2 cores, over 5 and over 9 s, so the cap below is 60).
 */
const PUBLISH_TIMEOUT_MS = 10000;
/** The held publishes all reach the producer before this; after it, the first of them could be answered. */
const HELD_WITHIN_MS = PUBLISH_TIMEOUT_MS - 1000;
/** The producer's cap: three of its batches (EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS, 20), two of them in flight. */
const QUEUE_MAX_EVENTS = 60;
const RETRY_AFTER_SECONDS = 2;
/**
 * Time for the answer itself, on top of the publish timeout, as the client times it: the client shares this jest
 * process's event loop with the instance, and the host's two cores with two other test lanes, and the held answers come
 * in one burst (1,090 ms past the timeout seen under three lanes). The bound still fails a runtime that waits for
 * Kafka instead of its timeout: the producer's request timeout is also 3 s and it tries a failed request again up to
 * five times (libs/kafka/event-producer.ts), so a publish let wait for Kafka through the cut takes several of those.
 */
const ANSWER_SLACK_MS = 2500;

interface Answer {
  id: string;
  status: number;
  ms: number;
  retryAfter: string | null;
  body: { code?: string; maybeWritten?: boolean; partition?: number; offset?: number };
}

/**
 * Backpressure on publish, against a real broker reached through a TCP proxy that can cut it off: the gateway
 * bootstraps at the fault listener's advertised address (127.0.0.1:9095), so every Kafka request of its producer
 * goes through the proxy. What is checked is what must be true whatever the timing: every publish is answered
 * within the publish timeout, a 202 only for an event Kafka holds, an event refused before it was sent is never in
 * Kafka, and the events held never pass the cap.
 */
describe('publish backpressure (real Kafka behind a proxy)', () => {
  const topic = uniqueTopic('shed');
  const proxy = new TcpProxy(kafkaFaultListener().host, FAULT_LISTENER, ADVERTISED);
  const direct = testConfig({ EVENTMESH_KAFKA_TOPICS: topic });
  let instance: RunningInstance;
  let kafka: Kafka;
  let admin: TopicAdmin;
  let reader: PartitionReader;

  beforeAll(async () => {
    await proxy.start();
    instance = await startInstance(
      testConfig({
        EVENTMESH_INSTANCE_ID: `shed-${randomUUID().slice(0, 8)}`,
        EVENTMESH_KAFKA_BROKERS: `${kafkaFaultListener().host}:${ADVERTISED}`,
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_KAFKA_TOPIC_PARTITIONS: '2',
        EVENTMESH_HTTP_PORT: '0',
        EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS: String(PUBLISH_TIMEOUT_MS),
        EVENTMESH_KAFKA_PRODUCE_QUEUE_MAX_EVENTS: String(QUEUE_MAX_EVENTS),
        EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS: '20',
        EVENTMESH_KAFKA_PRODUCE_MAX_IN_FLIGHT: '2',
        EVENTMESH_KAFKA_REQUEST_TIMEOUT_MS: '3000',
        EVENTMESH_HTTP_RETRY_AFTER_SECONDS: String(RETRY_AFTER_SECONDS),
      }),
      { roles: ['gateway'] },
    );
    // The checks read Kafka directly, not through the proxy.
    kafka = createKafka(direct.kafka, 'shed-check');
    admin = new TopicAdmin(kafka, direct.kafka);
    await admin.connect();
    reader = new PartitionReader(kafka);
    await reader.connect();
  });

  afterAll(async () => {
    await reader?.disconnect();
    await admin?.disconnect();
    await instance?.close();
    await proxy.stop();
  });

  const publish = async (id: string): Promise<Answer> => {
    const started = performance.now();
    const response = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({
        specversion: '1.0',
        id,
        source: '/shed',
        type: 'shed.test',
        data: { pad: 'x'.repeat(200) },
      }),
    });
    const body = (await response.json()) as Answer['body'];
    return {
      id,
      status: response.status,
      ms: performance.now() - started,
      retryAfter: response.headers.get('retry-after'),
      body,
    };
  };

  /** Every event id in the topic, by partition and offset (read directly from the broker). */
  async function eventsInKafka(): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    for (const [partition, end] of await admin.endOffsets(topic)) {
      for (let offset = 0; offset < end;) {
        const [fetched] = await reader.fetch([{ topic, partition, offset }], { maxWaitMs: 500 });
        if (fetched.records.length === 0) break;
        for (const r of fetched.records) found.set(String(r.headers.ce_id), `${partition}/${r.offset}`);
        offset = fetched.records[fetched.records.length - 1].offset + 1;
      }
    }
    return found;
  }

  const depth = (): ProducerDepth => instance.deps.producer.depth();

  /** How many of `publishes` have been answered (or failed) so far. */
  const answeredOf = (publishes: Promise<unknown>[]): (() => number) => {
    let answered = 0;
    for (const p of publishes)
      p.then(
        () => answered++,
        () => answered++,
      );
    return () => answered;
  };

  it('sheds while Kafka is cut off: 503 with Retry-After within the publish timeout, never 202 unacknowledged; heals to 202', async () => {
    const warm = await publish(`warm-${randomUUID()}`);
    expect(warm.status).toBe(202);
    // The longest stall of this process's event loop meanwhile (the instance's and the client's: one process).
    const loop = monitorEventLoopDelay({ resolution: 20 });
    loop.enable();

    proxy.cut();
    const run = randomUUID().slice(0, 8);
    // As many publishes as the cap: the producer holds them all, waiting for Kafka.
    const held = Array.from({ length: QUEUE_MAX_EVENTS }, (_, i) => publish(`cut-${run}-${i}`));
    const heldAnswered = answeredOf(held);
    await waitFor('the producer to hold its most events', () => depth().events >= QUEUE_MAX_EVENTS, {
      timeoutMs: HELD_WITHIN_MS,
    });
    // One more is refused at once, without waiting for Kafka: while the producer still holds every one of the
    // others and none of them has been answered (each waits for Kafka until the publish timeout), so the refusal
    // waited neither for Kafka nor for room. How many milliseconds it took is bench:publish's to measure
    // (its `overload` path, docs/benchmarks.md).
    const past = await publish(`past-${run}`);
    expect(past).toMatchObject({ status: 503, retryAfter: String(RETRY_AFTER_SECONDS), body: { code: 'OVERLOADED' } });
    expect({ answered: heldAnswered(), held: depth().events }).toEqual({ answered: 0, held: QUEUE_MAX_EVENTS });
    // What /health shows an operator meanwhile.
    const health = (await (await fetch(`${instance.url}/health`)).json()) as { stats: { producer: ProducerDepth } };
    expect(health.stats.producer).toMatchObject({ events: QUEUE_MAX_EVENTS, maxEvents: QUEUE_MAX_EVENTS });
    expect(health.stats.producer.bytes).toBeGreaterThan(0);
    const more = Array.from({ length: QUEUE_MAX_EVENTS }, (_, i) => publish(`more-${run}-${i}`));
    const answers = [past, ...(await Promise.all([...held, ...more]))];

    const byStatus = (status: number) => answers.filter((a) => a.status === status);
    const refused = byStatus(503);
    const overloaded = refused.filter((a) => a.body.code === 'OVERLOADED');
    const unavailable = refused.filter((a) => a.body.code === 'KAFKA_UNAVAILABLE');
    // Every publish was answered, with 503 unless Kafka acknowledged it.
    expect(answers.filter((a) => a.status !== 503 && a.status !== 202)).toEqual([]);
    expect(overloaded.length + unavailable.length).toBe(refused.length);
    expect(overloaded.length).toBeGreaterThan(0);
    expect(unavailable.length).toBeGreaterThan(0);
    expect(refused.filter((a) => a.retryAfter !== String(RETRY_AFTER_SECONDS))).toEqual([]);
    // Bounded waits: within the publish timeout, which is the promise, so it is timed (by the client: the instance's
    // histogram has no bucket between 2.5 s and 5 s), with ANSWER_SLACK_MS for a loaded host, and the longest stall
    // of the event loop the instance and the client share (a CI host at load average 8.6 stalled it past the slack:
    // 8,632 ms against 8,500); past the cap without waiting out that timeout (typically in milliseconds: the bound
    // only means it did not wait for Kafka).
    loop.disable();
    const stallMs = loop.max / 1e6;
    const slowest = Math.max(...answers.map((a) => a.ms));
    expect(slowest).toBeLessThan(PUBLISH_TIMEOUT_MS + ANSWER_SLACK_MS + stallMs);
    expect(Math.max(...overloaded.map((a) => a.ms))).toBeLessThan(PUBLISH_TIMEOUT_MS);
    // The producer never held more than its cap.
    expect(depth().peakEvents).toBeLessThanOrEqual(QUEUE_MAX_EVENTS);
    expect(depth().shed).toBeGreaterThanOrEqual(overloaded.length);

    proxy.heal();
    const healed = await waitFor(
      'a publish acknowledged after the heal',
      async () => {
        const a = await publish(`healed-${randomUUID()}`);
        return a.status === 202 ? a : undefined;
      },
      { timeoutMs: 30000, intervalMs: 200 },
    );
    // The producer lets go of everything it held once Kafka answers again.
    await waitFor('the producer to hold nothing', () => depth().events === 0, { timeoutMs: 30000 });

    const inKafka = await eventsInKafka();
    // Every 202 is in Kafka, where its receipt says.
    for (const a of [warm, healed, ...byStatus(202)])
      expect(`${a.id} ${inKafka.get(a.id)}`).toBe(`${a.id} ${a.body.partition}/${a.body.offset}`);
    // An event refused before it was handed to Kafka is not there (an unacknowledged one may be: a duplicate on retry).
    const neverSent = refused.filter((a) => a.body.code === 'OVERLOADED' || a.body.maybeWritten === false);
    expect(neverSent.length).toBeGreaterThan(0);
    expect(neverSent.filter((a) => inKafka.has(a.id)).map((a) => a.id)).toEqual([]);
  });

  /** A batch of `size` events (ids `<prefix>-<i>`): its status, Retry-After, body and time to answer. */
  const publishBatch = async (prefix: string, size: number) => {
    const started = performance.now();
    const events = Array.from({ length: size }, (_, i) => ({
      specversion: '1.0',
      id: `${prefix}-${i}`,
      source: '/shed',
      type: 'shed.batch',
      data: { pad: 'x'.repeat(200) },
    }));
    const response = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents-batch+json' },
      body: JSON.stringify(events),
    });
    const body = (await response.json()) as {
      code?: string;
      maybeWritten?: boolean;
      results?: { id: string; partition: number; offset: number }[];
    };
    return {
      prefix,
      ids: events.map((e) => e.id),
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      body,
      ms: performance.now() - started,
    };
  };

  it('batch mode sheds whole batches: 503 with Retry-After, a refused batch not written, 202 only with every event acknowledged', async () => {
    await waitFor('the producer to hold nothing', () => depth().events === 0, { timeoutMs: 30000 });
    const run = randomUUID().slice(0, 8);
    const BATCH = 20; // EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS above
    proxy.cut();
    // Batches up to the cap: the producer holds them, waiting for Kafka.
    const held = Array.from({ length: QUEUE_MAX_EVENTS / BATCH }, (_, i) => publishBatch(`bcut-${run}-${i}`, BATCH));
    const heldAnswered = answeredOf(held);
    await waitFor('the producer to hold its most events', () => depth().events >= QUEUE_MAX_EVENTS, {
      timeoutMs: HELD_WITHIN_MS,
    });
    // One more batch is refused whole, at once: while the held batches are all still held and unanswered, as above.
    const past = await publishBatch(`bpast-${run}`, BATCH);
    expect(past).toMatchObject({ status: 503, retryAfter: String(RETRY_AFTER_SECONDS), body: { code: 'OVERLOADED' } });
    expect(past.body.results).toBeUndefined();
    expect({ answered: heldAnswered(), held: depth().events }).toEqual({ answered: 0, held: QUEUE_MAX_EVENTS });
    // The held ones: Kafka never answered, so none is 202.
    const answers = await Promise.all(held);
    expect(answers.map((a) => `${a.status} ${a.body.code}`)).toEqual(answers.map(() => '503 KAFKA_UNAVAILABLE'));
    expect(answers.filter((a) => a.retryAfter !== String(RETRY_AFTER_SECONDS))).toEqual([]);

    proxy.heal();
    const healed = await waitFor(
      'a batch acknowledged after the heal',
      async () => {
        const a = await publishBatch(`bhealed-${run}-${randomUUID().slice(0, 4)}`, BATCH);
        return a.status === 202 ? a : undefined;
      },
      { timeoutMs: 30000, intervalMs: 200 },
    );
    await waitFor('the producer to hold nothing', () => depth().events === 0, { timeoutMs: 30000 });
    const inKafka = await eventsInKafka();
    // A 202 batch: one result per event, in request order, each in Kafka where it says.
    expect(healed.body.results!.map((r) => r.id)).toEqual(healed.ids);
    for (const r of healed.body.results!)
      expect(`${r.id} ${inKafka.get(r.id)}`).toBe(`${r.id} ${r.partition}/${r.offset}`);
    // The batch refused before it was handed to Kafka: none of its events is there.
    expect(past.ids.filter((id) => inKafka.has(id))).toEqual([]);
  });
});

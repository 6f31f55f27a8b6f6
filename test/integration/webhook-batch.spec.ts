import type { Producer } from 'kafkajs';
import { randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { DataSource } from 'typeorm';
import type { Deliverer, DispatchProgress } from '@libs/delivery';
import { frameToKafkaMessage } from '@libs/frame';
import { PartitionReader } from '@libs/kafka';
import { DeadLetterEntity, SubscriptionEntity } from '@libs/storage';
import { DeliveryStack, dispatchLoopOf, openDeliveryStack } from '../support/delivery-stack';
import { uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';
import { ReceivedRequest, WebhookReceiver } from '../support/webhook-receiver';

const BATCH_TYPE = 'application/cloudevents-batch+json';

/**
 * Batched webhook delivery (`config.batch`) with the real dispatch loop, Postgres stores, Kafka and a sink on
 * loopback: CloudEvents batch content mode signed once per batch; a batch holds consecutive events of one partition,
 * and each key keeps its order across batches; a failed batch is retried as a batch, then split at once down to the
 * event the sink refuses, which alone is dead-lettered; an unacknowledged batch is not committed.
 */
describe('batched webhook delivery (real Postgres, Kafka and sink)', () => {
  const topic = uniqueTopic('webhook-batch');
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  let stack: DeliveryStack;
  let db: DataSource;
  let producer: Producer;
  let reader: PartitionReader;
  let sink: WebhookReceiver;
  const stops: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    stack = await openDeliveryStack('webhook-batch-spec', topic, 2, 5000);
    ({ db, producer } = stack);
    reader = new PartitionReader(stack.kafka);
    await reader.connect();
    sink = new WebhookReceiver();
    await sink.start();
  });

  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
    sink.gate = undefined;
    sink.status = () => 200;
    sink.requests.length = 0;
  });

  afterAll(async () => {
    await sink.stop();
    await reader.disconnect();
    await stack.close();
  });

  /** The dispatch loop of `instanceId` running, under a new epoch of its dispatch run. */
  async function runLoop(instanceId: string) {
    const { webhooks } = stack;
    const epoch = await stack.runs.claim(instanceId, 'webhook batch spec');
    const sender: Deliverer = {
      send: (target, frame, messageId, signal) => webhooks.send(target, frame, messageId, signal),
      sendBatch: (target, batch, messageId, signal) => webhooks.sendBatch(target, batch, messageId, signal),
    };
    const loop = dispatchLoopOf(stack, reader, instanceId, epoch, sender);
    const stop = new AbortController();
    let progress: DispatchProgress | undefined;
    const running = loop.run(stop.signal, Date.now() + 120000, (p) => (progress = p));
    const stopped = () => (stop.abort(), running.catch(() => undefined));
    stops.push(stopped);
    return { progress: () => progress, stop: stopped };
  }

  /** A signed webhook subscription with `config` from the end of the log, and its instance's loop running. */
  async function start(config: Record<string, unknown>) {
    const instanceId = `batch-${randomUUID().slice(0, 8)}`;
    const id = randomUUID();
    await db.manager.insert(SubscriptionEntity, {
      id,
      topic,
      protocol: 'HTTP',
      sink: sink.url!,
      signingSecret: secret,
      instanceId,
      status: 'ACTIVE',
      config: config as never,
    });
    const ends = await stack.topics.endOffsets(topic);
    await stack.offsets.commit(
      [...ends].map(([partition, nextOffset]) => ({ subscriptionId: id, topic, partition, nextOffset, epoch: 0 })),
    );
    const loop = await runLoop(instanceId);
    const stored = async (partition = 0) =>
      (await stack.offsets.positionsOf([id])).find((p) => p.partition === partition)!.nextOffset;
    return { id, instanceId, from: ends.get(0)!, stored, ...loop };
  }

  /** Events `<prefix>-<n>` to `partition` in one send (one record batch), `key` choosing each one's partition key. */
  async function publish(prefix: string, count: number, partition = 0, key = (_n: number) => 'k', size = 16) {
    const run = randomUUID().slice(0, 4);
    const ids = Array.from({ length: count }, (_, n) => `${prefix}-${n}-${run}`);
    await producer.send({
      topic,
      acks: -1,
      messages: ids.map((id, n) => ({
        ...frameToKafkaMessage({
          id,
          source: '/batch-spec',
          type: 'spec',
          // Partition 1's data is JSON (it goes in the batch as its own bytes), the others' text.
          datacontenttype: partition === 1 ? 'application/json' : 'text/plain',
          extensions: { partitionkey: key(n) },
          data: Buffer.from(partition === 1 ? JSON.stringify({ id, n: [n] }) : id.padEnd(size, '.')),
        }),
        partition,
      })),
    });
    return ids;
  }

  /** The event ids of a request, which must be a batch. */
  const idsOf = (r: ReceivedRequest): string[] => {
    expect(r.headers['content-type']).toBe(BATCH_TYPE);
    return (JSON.parse(r.body.toString('utf8')) as { id: string }[]).map((e) => e.id);
  };
  const batches = () => sink.requests.map(idsOf);
  const deadLettersOf = (subscriptionId: string) =>
    db.manager.find(DeadLetterEntity, { where: { subscriptionId }, order: { position: { offset: 'ASC' } } });

  it('sends consecutive events of one partition per batch, at most maxEvents, in order, each signed once over its bytes', async () => {
    const { stored, progress } = await start({ batch: { maxEvents: 10, lingerMs: 2000 } });
    const ends = await stack.topics.endOffsets(topic);
    const p0 = await publish('p0', 25, 0);
    const p1 = await publish('p1', 25, 1);
    await waitFor('every event', () => batches().flat().length >= 50, { timeoutMs: 60000 });
    const verifier = new Webhook(secret);
    const webhookIds = new Set<string>();
    for (const request of sink.requests) {
      const headers = request.headers as Record<string, string>;
      // The standardwebhooks package checks the one signature over the exact bytes received.
      const events = verifier.verify(request.body.toString('utf8'), headers) as { id: string; data: unknown }[];
      expect(events.map((e) => e.id)).toEqual(idsOf(request));
      for (const e of events)
        expect(e.data).toEqual(
          e.id.startsWith('p1-') ? { id: e.id, n: [Number(e.id.split('-')[1])] } : e.id.padEnd(16, '.'),
        );
      webhookIds.add(headers['webhook-id']);
    }
    expect(webhookIds.size).toBe(sink.requests.length);
    // Each batch holds consecutive events of one partition; each partition arrives in order, 10 + 10 + 5.
    for (const ids of [p0, p1]) {
      const own = batches().filter((b) => ids.includes(b[0]));
      for (const b of own) expect(ids.slice(ids.indexOf(b[0]), ids.indexOf(b[0]) + b.length)).toEqual(b);
      expect(own.map((b) => b.length)).toEqual([10, 10, 5]);
      expect(own.flat()).toEqual(ids);
    }
    await waitFor(
      'both offsets stored past every event',
      async () => (await stored(0)) === ends.get(0)! + 25 && (await stored(1)) === ends.get(1)! + 25,
      { timeoutMs: 60000 },
    );
    expect(progress()!.delivered).toBe(50);
  }, 120000);

  it("bounds a batch's body by maxBytes", async () => {
    const { from, stored } = await start({ batch: { maxEvents: 100, maxBytes: 1024, lingerMs: 2000 } });
    const ids = await publish('big', 12, 0, () => 'k', 200);
    await waitFor('every event', () => batches().flat().length >= 12, { timeoutMs: 60000 });
    for (const request of sink.requests) expect(request.body.length).toBeLessThanOrEqual(1024);
    expect(Math.max(...batches().map((b) => b.length))).toBeGreaterThan(1);
    expect(batches().flat()).toEqual(ids);
    await waitFor('the offset stored past every event', async () => (await stored()) === from + 12);
  }, 120000);

  it('keeps each key in order across batches while an event of a key is parked, the other keys going on', async () => {
    const { from, stored, progress } = await start({
      ordering: 'key',
      batch: { maxEvents: 4, lingerMs: 1000 },
      retry: { initialDelayMs: 20, maxDelayMs: 20, maxAttempts: 50 },
    });
    const keys = ['a', 'b', 'c'];
    // a-0 b-0 c-0 a-1 b-1 c-1 ...: four of each key, taking turns.
    const ids = await publish('ev', 12, 0, (n) => keys[n % 3]);
    const keyOf = (id: string) => keys[ids.indexOf(id) % 3];
    const badId = ids[4];
    // Every request holding b's second event is refused 8 times: the batch's 3 attempts, the split's, and then
    // the parked event's own attempts; the lane holds b's later events behind it.
    let refusals = 8;
    const accepted: string[] = [];
    sink.status = (r) => {
      const got = idsOf(r);
      if (got.includes(badId) && refusals-- > 0) return 500;
      accepted.push(...got);
      return 200;
    };
    await waitFor('every event accepted', () => ids.every((id) => accepted.includes(id)), { timeoutMs: 60000 });
    for (const key of keys) {
      const firstAcceptances = [...new Set(accepted.filter((id) => keyOf(id) === key))];
      expect(firstAcceptances).toEqual(ids.filter((id) => keyOf(id) === key));
    }
    expect(progress()!.parked).toBe(1);
    expect(progress()!.parkedBehind).toBeGreaterThanOrEqual(1);
    await waitFor('the offset stored past every event', async () => (await stored()) === from + 12, {
      timeoutMs: 60000,
    });
  }, 120000);

  it('retries a failed batch as a batch, then splits it at once: only the refused event is dead-lettered', async () => {
    const { id, from, stored, progress } = await start({
      batch: { maxEvents: 8, lingerMs: 2000 },
      retry: { initialDelayMs: 10, maxDelayMs: 10, maxAttempts: 3 },
    });
    const ids = await publish('one-bad', 8);
    sink.status = (r) => (idsOf(r).includes(ids[5]) ? 400 : 200);
    await waitFor('the offset stored past every event', async () => (await stored()) === from + 8, {
      timeoutMs: 60000,
    });
    const whole = sink.requests.slice(0, 3);
    expect(new Set(whole.map((r) => r.headers['webhook-id'])).size).toBe(1);
    const part = (from: number, to: number) => ids.slice(from, to);
    expect(batches()).toEqual([ids, ids, ids, part(0, 4), part(4, 8), part(4, 6), part(4, 5), part(5, 6), part(6, 8)]);
    const letters = await deadLettersOf(id);
    expect(letters.map((l) => [l.position.offset, l.eventId, l.attempts])).toEqual([[from + 5, ids[5], 4]]);
    expect(progress()!.delivered).toBe(7);
  }, 120000);

  it('splits without a backoff per split: with an hour between retries, the neighbours still go at once', async () => {
    const { id, from, stored } = await start({
      batch: { maxEvents: 8, lingerMs: 2000 },
      retry: { initialDelayMs: 3600000, maxDelayMs: 3600000, maxAttempts: 1 },
    });
    const ids = await publish('no-backoff', 8);
    sink.status = (r) => (idsOf(r).includes(ids[2]) ? 422 : 200);
    await waitFor('the offset stored past every event', async () => (await stored()) === from + 8, {
      timeoutMs: 60000,
    });
    const part = (from: number, to: number) => ids.slice(from, to);
    expect(batches()).toEqual([ids, part(0, 4), part(0, 2), part(2, 4), part(2, 3), part(3, 4), part(4, 8)]);
    const letters = await deadLettersOf(id);
    expect(letters.map((l) => l.position.offset)).toEqual([from + 2]);
  }, 120000);

  it('commits nothing of a batch the sink has not acknowledged: a loop that stops mid-batch redelivers it', async () => {
    let release!: () => void;
    sink.gate = new Promise<void>((resolve) => (release = resolve));
    const { instanceId, from, stored, progress, stop } = await start({ batch: { maxEvents: 10, lingerMs: 2000 } });
    const ids = await publish('unacked', 6);
    await waitFor('the batch at the sink', () => sink.requests.length === 1, { timeoutMs: 60000 });
    const rounds = progress()!.rounds;
    await waitFor('a few more rounds of the loop', () => progress()!.rounds >= rounds + 5, { timeoutMs: 60000 });
    expect(await stored()).toBe(from);
    await stop();
    release();
    sink.gate = undefined;
    await runLoop(instanceId);
    await waitFor('the offset stored past every event', async () => (await stored()) === from + 6, {
      timeoutMs: 60000,
    });
    expect(batches()).toEqual([ids, ids]);
    expect(sink.requests[1].headers['webhook-id']).toBe(sink.requests[0].headers['webhook-id']);
  }, 120000);
});

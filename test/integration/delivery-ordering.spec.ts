import type { Kafka, Producer } from 'kafkajs';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { frameToKafkaMessage } from '@libs/frame';
import { PartitionReader } from '@libs/kafka';
import { DeliveryRetryEntity, OffsetStore } from '@libs/storage';
import { DeliveryStack, openDeliveryStack, webhookSubscriptionFromEnd } from '../support/delivery-stack';
import { uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';
import { ReceivedRequest, WebhookReceiver } from '../support/webhook-receiver';

/**
 * Ordering `key` with the real dispatch loop, Postgres stores, Kafka and a webhook sink on loopback: different keys
 * of one partition delivered at once and each key in order; the stored offset never past an event that is not
 * settled; a failing key parked alone, its later events parked behind it and delivered after it, in order, while
 * the other keys go on.
 */
describe('DispatchLoop with ordering key (real Postgres, Kafka and sink)', () => {
  const topic = uniqueTopic('ordering');
  let stack: DeliveryStack;
  let db: DataSource;
  let kafka: Kafka;
  let producer: Producer;
  let reader: PartitionReader;
  let offsets: OffsetStore;
  let sink: WebhookReceiver;
  const stops: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    stack = await openDeliveryStack('delivery-ordering-spec', topic, 1, 5000);
    ({ db, kafka, producer, offsets } = stack);
    reader = new PartitionReader(kafka);
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

  /** An instance of its own with one `key`-ordered webhook subscription from the end of the log, and its loop running. */
  async function start(concurrency: number, retryDelayMs = 10) {
    const { id, from, progress, stop } = await webhookSubscriptionFromEnd(stack, reader, topic, sink.url!, 'ord', {
      ordering: 'key',
      concurrency,
      retry: { initialDelayMs: retryDelayMs, maxDelayMs: retryDelayMs, maxAttempts: 50 },
    });
    stops.push(stop);
    const stored = async () => (await offsets.positionsOf([id]))[0].nextOffset;
    return { id, from, stored, progress };
  }

  /** `count` events per key, the keys taking turns: key order within the partition is the publish order. */
  async function publish(keys: string[], count: number): Promise<string[]> {
    const run = randomUUID().slice(0, 4);
    const ids: string[] = [];
    const messages = [];
    for (let n = 0; n < count; n++) {
      for (const key of keys) {
        const id = `${key}-${n}-${run}`;
        ids.push(id);
        messages.push({
          ...frameToKafkaMessage({
            id,
            source: '/ordering-spec',
            type: 'spec',
            extensions: { partitionkey: key },
            data: Buffer.from(id),
          }),
          partition: 0,
        });
      }
    }
    await producer.send({ topic, acks: -1, messages });
    return ids;
  }

  const idOf = (r: ReceivedRequest) => String(r.headers['ce-id']);
  const arrivals = () => sink.requests.map(idOf);
  const ofKey = (ids: string[], key: string) => ids.filter((id) => id.startsWith(`${key}-`));
  const firstArrival = (id: string) => arrivals().indexOf(id);
  const lastArrival = (id: string) => arrivals().lastIndexOf(id);

  it('delivers other keys past an unanswered event, keeps each key in order, and stores the lowest offset not settled', async () => {
    const { from, stored, progress } = await start(4);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    sink.gate = (r) => (idOf(r).startsWith('k1-0-') ? held : undefined);
    const ids = await publish(['k0', 'k1', 'k2', 'k3'], 3);
    // Every event of the other keys arrives while k1-0 (offset from + 1) waits for its answer; k1's later ones wait.
    await waitFor(
      'the events of k0, k2 and k3',
      () => ['k0', 'k2', 'k3'].every((k) => ofKey(arrivals(), k).length === 3),
      { timeoutMs: 60000 },
    );
    expect(ofKey(arrivals(), 'k1')).toEqual([ids[1]]);
    // The offset is stored up to k1-0, and stays there through later commits of the loop.
    await waitFor('the offset stored up to k1-0', async () => (await stored()) === from + 1, { timeoutMs: 60000 });
    const rounds = progress()!.rounds;
    await waitFor('a few more rounds of the loop', () => progress()!.rounds >= rounds + 5, { timeoutMs: 60000 });
    expect(await stored()).toBe(from + 1);
    release();
    await waitFor('every event', () => new Set(arrivals()).size === 12, { timeoutMs: 60000 });
    for (const k of ['k0', 'k1', 'k2', 'k3']) expect(ofKey(arrivals(), k)).toEqual(ofKey(ids, k));
    await waitFor('the offset stored past every event', async () => (await stored()) === from + 12, {
      timeoutMs: 60000,
    });
  }, 360000);

  it('parks a failing key alone: its later events wait in the retry table behind it, the other key goes on, and the key keeps its order', async () => {
    // Retries at least 150 ms apart: the good key's four events all go out while bad-0 waits for its second attempt.
    const { id, from, stored, progress } = await start(4, 300);
    // bad-0 fails its first 5 attempts: 3 in the lane, then it is parked and retried by the lane from the table.
    let failuresLeft = 5;
    sink.status = (r) => (idOf(r).startsWith('bad-0-') && failuresLeft-- > 0 ? 500 : 200);
    const ids = await publish(['bad', 'good'], 4);
    await waitFor('every event delivered', () => ids.every((e) => lastArrival(e) >= 0) && failuresLeft < 0, {
      timeoutMs: 30000,
    });
    // The good key was never held: all of it arrived before bad-0's second attempt.
    const secondAttempt = arrivals().indexOf(ids[0], firstArrival(ids[0]) + 1);
    for (const g of ofKey(ids, 'good')) expect(firstArrival(g)).toBeLessThan(secondAttempt);
    // bad's later events: one attempt each, after bad-0's acknowledgement, in order.
    const bad = ofKey(ids, 'bad');
    for (const b of bad.slice(1)) expect(arrivals().filter((a) => a === b)).toHaveLength(1);
    expect(arrivals().filter((a) => a === bad[0])).toHaveLength(6);
    expect(bad.map(firstArrival)).toEqual([...bad.map(firstArrival)].sort((a, b) => a - b));
    expect(firstArrival(bad[1])).toBeGreaterThan(lastArrival(bad[0]));
    expect(progress()!.parked).toBe(1);
    expect(progress()!.parkedBehind).toBe(3);
    await waitFor(
      'the retry table emptied and the offset stored past every event',
      async () =>
        (await db.manager.count(DeliveryRetryEntity, { where: { subscriptionId: id } })) === 0 &&
        (await stored()) === from + 8,
      { timeoutMs: 60000 },
    );
  }, 120000);
});

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Client } from '@temporalio/client';
import {
  EventMeshClient,
  RejectError,
  RequestTimeoutError,
  webhookReceiver,
  type Consumer,
  type Transport,
} from '@eventmesh/client';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { NoUpgradeProxy } from '../support/no-upgrade-proxy';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * The SDK (`@eventmesh/client`, imported through the workspace) against a real instance process: publish one,
 * many (batched, split to the limits the instance reports) and request-reply with its 408; a stream consumer on each transport; and the fallback to SSE
 * through a proxy that refuses WebSocket upgrades, with no transport option set.
 */
/** The instance's small publish bounds: the batch case's 40 events fit, the limits case's batches do not. */
const LIMITS = { events: 40, bytes: 128 * 1024 };

describe('@eventmesh/client against a real instance', () => {
  const topic = uniqueTopic('sdk');
  const instanceId = `sdk-${randomUUID().slice(0, 6)}`;
  let instance: InstanceProcess;
  let temporal: { client: Client; close(): Promise<void> };
  let mesh: EventMeshClient;
  let url: string;
  const publishRequests: string[] = [];
  const consumers: Consumer[] = [];

  beforeAll(async () => {
    temporal = await temporalClient();
    instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '3',
      EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS: String(LIMITS.events),
      EVENTMESH_HTTP_BODY_LIMIT_BYTES: String(LIMITS.bytes),
    });
    url = await instance.ready();
    const counting: typeof fetch = (input, init) => {
      if (String(input).includes('/events/publish'))
        publishRequests.push(String(init?.headers && (init.headers as Record<string, string>)['content-type']));
      return fetch(input, init);
    };
    mesh = new EventMeshClient({ url, topic, source: '/sdk-e2e', fetch: counting });
  });
  afterAll(async () => {
    await Promise.all(consumers.map((c) => c.close()));
    await instance.stop();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await temporal.close();
  });

  const streamOf = async (filters: Record<string, unknown>[] = []) =>
    (await mesh.subscriptions.create({ protocol: 'STREAM', topic, filters })).id;
  const collect = (client: EventMeshClient, sub: string, transport?: Transport) => {
    const ids: string[] = [];
    const consumer = client.consume(sub, async (event) => void ids.push(event.id), { transport });
    consumers.push(consumer);
    return { ids, consumer };
  };
  const connected = (consumer: Consumer) =>
    waitFor('the consumer connected', () => consumer.state === 'connected', { timeoutMs: 30000 });

  it('publishes one event and a batch; publishMany shares batch requests; a consumer gets them all', async () => {
    const type = `sdk.pub.${randomUUID().slice(0, 6)}`;
    const sub = await streamOf([{ exact: { type } }]);
    const { ids, consumer } = collect(mesh, sub);
    await connected(consumer);
    publishRequests.length = 0;
    const one = await mesh.publish({ type, data: { n: 0 } });
    expect(one).toMatchObject({ topic, id: expect.any(String) });
    expect(publishRequests).toEqual(['application/cloudevents+json']);
    const many = await mesh.publishMany(Array.from({ length: 40 }, (_, n) => ({ type, data: { n: n + 1 } })));
    expect(publishRequests).toEqual(['application/cloudevents+json', 'application/cloudevents-batch+json']);
    expect(new Set(many.map((r) => r.id)).size).toBe(40);
    for (const r of many)
      expect(r).toEqual({ id: r.id, topic, partition: expect.any(Number), offset: expect.any(Number) });
    const sent = [one.id, ...many.map((r) => r.id)];
    await waitFor('all 41 consumed', () => sent.every((id) => ids.includes(id)), { timeoutMs: 60000 });
    expect(ids.sort()).toEqual(sent.sort());
    await waitFor('all 41 acked', () => consumer.stats.acked === 41);
  });

  it('splits a publishMany larger than the limits the instance reports (GET /limits), whatever its options: each event published once, no refusal', async () => {
    const type = `sdk.limits.${randomUUID().slice(0, 6)}`;
    const sub = await streamOf([{ exact: { type } }]);
    const { ids, consumer } = collect(mesh, sub);
    await connected(consumer);
    const requests: { events: number; bytes: number; status: number }[] = [];
    const recording: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (String(input).includes('/events/publish')) {
        const body = String(init?.body);
        requests.push({
          events: ([] as unknown[]).concat(JSON.parse(body)).length,
          bytes: Buffer.byteLength(body),
          status: res.status,
        });
      }
      return res;
    };
    const unbounded = new EventMeshClient({
      url,
      topic,
      source: '/sdk-e2e',
      fetch: recording,
      publish: { maxBatchEvents: 100000, maxBatchBytes: 64 * 1024 * 1024 },
    });
    // 100 small events (over the count) and 30 of 8 KiB (240 KiB, over the body bound).
    const small = Array.from({ length: 100 }, (_, n) => ({ type, data: { n } }));
    const large = Array.from({ length: 30 }, (_, n) => ({ type, data: { n, pad: 'x'.repeat(8192) } }));
    const results = [...(await unbounded.publishMany(small)), ...(await unbounded.publishMany(large))];
    expect(requests.filter((r) => r.status !== 202)).toEqual([]);
    expect(requests.length).toBeGreaterThan(3);
    expect(Math.max(...requests.map((r) => r.events))).toBeLessThanOrEqual(LIMITS.events);
    expect(Math.max(...requests.map((r) => r.bytes))).toBeLessThanOrEqual(LIMITS.bytes);
    expect(requests.reduce((n, r) => n + r.events, 0)).toBe(130);
    const sent = results.map((r) => r.id);
    expect(new Set(results.map((r) => `${r.partition}:${r.offset}`)).size).toBe(130);
    await waitFor('all 130 consumed', () => ids.length >= 130, { timeoutMs: 60000 });
    expect(ids.sort()).toEqual(sent.sort());
    expect(consumer.stats.duplicates).toBe(0);
  });

  it("answers a request with its responder's reply, and a request nobody answers with RequestTimeoutError (408)", async () => {
    const type = `sdk.req.${randomUUID().slice(0, 6)}`;
    const sub = await streamOf([{ exact: { type } }]);
    const responder = mesh.consume(sub, async (event) => {
      await mesh.reply(event, { type: `${type}.reply`, data: { echo: event.data } });
    });
    consumers.push(responder);
    await connected(responder);
    const reply = await mesh.request({ type, data: { q: 42 } }, { timeoutMs: 30000 });
    expect(reply.type).toBe(`${type}.reply`);
    expect(reply.data).toEqual({ echo: { q: 42 } });
    const unanswered = mesh.request({ type: `sdk.nobody.${randomUUID()}` }, { timeoutMs: 500 });
    await expect(unanswered).rejects.toBeInstanceOf(RequestTimeoutError);
    await expect(unanswered).rejects.toMatchObject({
      code: 'REQUEST_TIMEOUT',
      status: 408,
      body: { correlationId: expect.any(String) },
    });
  });

  it.each<Transport>(['websocket', 'sse', 'long-poll'])(
    'consumes over %s and acks each event after its handler',
    async (transport) => {
      const type = `sdk.${transport}.${randomUUID().slice(0, 6)}`;
      const sub = await streamOf([{ exact: { type } }]);
      const { ids, consumer } = collect(mesh, sub, transport);
      await connected(consumer);
      expect(consumer.transport).toBe(transport);
      const sent = (await mesh.publishMany(Array.from({ length: 10 }, () => ({ type })))).map((r) => r.id);
      await waitFor(`10 events over ${transport}`, () => consumer.stats.acked === 10, { timeoutMs: 60000 });
      expect(ids.sort()).toEqual(sent.sort());
      expect(consumer.stats).toMatchObject({ handled: 10, duplicates: 0, nacked: 0, rejected: 0 });
    },
  );

  it.each([
    { refuses: 'WebSocket upgrades', refuseEventStreams: false, transport: 'sse', refused: [1, 0] },
    {
      refuses: 'WebSocket upgrades and event streams',
      refuseEventStreams: true,
      transport: 'long-poll',
      refused: [1, 1],
    },
  ])(
    'falls back to $transport by itself when a proxy refuses $refuses',
    async ({ refuseEventStreams, transport, refused }) => {
      const proxy = new NoUpgradeProxy(instance.url!, { refuseEventStreams });
      const viaProxy = new EventMeshClient({ url: await proxy.listen(), topic, source: '/sdk-e2e' });
      try {
        const type = `sdk.fallback.${randomUUID().slice(0, 6)}`;
        const sub = await streamOf([{ exact: { type } }]);
        const { ids, consumer } = collect(viaProxy, sub);
        await connected(consumer);
        expect(consumer.transport).toBe(transport);
        expect([proxy.upgradesRefused, proxy.eventStreamsRefused]).toEqual(refused);
        const sent = (await viaProxy.publishMany(Array.from({ length: 5 }, () => ({ type })))).map((r) => r.id);
        await waitFor(`5 events over ${transport} through the proxy`, () => consumer.stats.acked === 5, {
          timeoutMs: 60000,
        });
        expect(ids.sort()).toEqual(sent.sort());
        await consumer.close();
      } finally {
        await proxy.close();
      }
    },
  );

  it("receives a webhook subscription's events with webhookReceiver: handshake, signatures checked with the secret of the create", async () => {
    let secret = '';
    const got: unknown[] = [];
    const receiver = webhookReceiver({ secret: () => secret, handler: (e) => void got.push([e.id, e.data]) });
    const server = http.createServer(receiver.node);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const type = `sdk.hook.${randomUUID().slice(0, 6)}`;
      const sink = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const created = await mesh.subscriptions.create({ sink, topic, filters: [{ exact: { type } }] });
      expect(created.secret).toMatch(/^whsec_/);
      secret = created.secret!;
      const sent = await mesh.publishMany([1, 2, 3].map((n) => ({ type, data: { n } })));
      await waitFor('3 events at the webhook', () => got.length === 3, { timeoutMs: 60000 });
      expect(got).toEqual(expect.arrayContaining(sent.map((r, n) => [r.id, { n: n + 1 }])));
      expect(receiver.stats.refused).toBe(0);
      expect(await mesh.subscriptions.delete(created.id)).toBe(true);
      expect(await mesh.subscriptions.delete(created.id)).toBe(false);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('keeps the delivery of a handler that runs past the ack timeout (extended while it runs): called once, acked, never delivered again', async () => {
    const type = `sdk.extended.${randomUUID().slice(0, 6)}`;
    const sub = (
      await mesh.subscriptions.create({
        protocol: 'STREAM',
        topic,
        filters: [{ exact: { type } }],
        config: { ackTimeoutMs: 300, retry: { initialDelayMs: 10 } },
      })
    ).id;
    let calls = 0;
    // The handler's work outlasts the ack timeout ten times over; the consumer extends the delivery every 100 ms.
    const consumer = mesh.consume(sub, async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 3000));
    });
    consumers.push(consumer);
    await connected(consumer);
    await mesh.publish({ type });
    await waitFor('the event handled and acked', () => consumer.stats.acked >= 1, { timeoutMs: 60000 });
    // A redelivery during the handler (had the deadline passed) would be waiting for it, and acked as a duplicate
    // right after it.
    await new Promise((r) => setTimeout(r, 1000));
    expect(calls).toBe(1);
    expect(consumer.stats).toMatchObject({ handled: 1, acked: 1, duplicates: 0 });
  });

  it('without extensions, does not call a handler again while it runs past the ack timeout: the redelivery waits for it, then is acked as a duplicate', async () => {
    const type = `sdk.slow.${randomUUID().slice(0, 6)}`;
    const sub = (
      await mesh.subscriptions.create({
        protocol: 'STREAM',
        topic,
        filters: [{ exact: { type } }],
        config: { ackTimeoutMs: 300, retry: { initialDelayMs: 10 } },
      })
    ).id;
    let calls = 0;
    const consumer = mesh.consume(
      sub,
      async () => {
        calls++;
        // The handler's work outlasts the ack timeout many times over, so the runtime delivers the event again meanwhile.
        await new Promise((r) => setTimeout(r, 3000));
      },
      { ackDeadlineMs: false },
    );
    consumers.push(consumer);
    await connected(consumer);
    await mesh.publish({ type });
    await waitFor('the redelivery acked as a duplicate', () => consumer.stats.duplicates >= 1, { timeoutMs: 60000 });
    expect(calls).toBe(1);
    expect(consumer.stats.handled).toBe(1);
  });

  it("takes a batched subscription's batches over WebSocket, each one delivery; an event its handler rejects is dead-lettered alone, its neighbours handled once", async () => {
    const type = `sdk.batched.${randomUUID().slice(0, 6)}`;
    const sub = (
      await mesh.subscriptions.create({
        protocol: 'STREAM',
        topic,
        filters: [{ exact: { type } }],
        // A batch lingers up to 300 ms after its first event for more: the 120 events come in a few batches.
        config: { batch: { maxEvents: 50, lingerMs: 300 } },
      })
    ).id;
    const handled = new Map<string, number>();
    /** Each event's first delivery id. */
    const firstDelivery = new Map<string, string>();
    const consumer = mesh.consume(
      sub,
      async (event, { deliveryId }) => {
        handled.set(event.id, (handled.get(event.id) ?? 0) + 1);
        if (!firstDelivery.has(event.id)) firstDelivery.set(event.id, deliveryId);
        if ((event.data as { n: number }).n === 77) throw new RejectError('n 77 is refused');
      },
      { transport: 'websocket' },
    );
    consumers.push(consumer);
    await connected(consumer);
    const published = await mesh.publishMany(Array.from({ length: 120 }, (_, n) => ({ type, data: { n } })));
    const bad = published[77].id;
    const letters = async () => {
      const res = await fetch(`${url}/subscriptions/${sub}/dead-letters`);
      return ((await res.json()) as { items: { eventId: string }[] }).items;
    };
    await waitFor('the refused event dead-lettered', async () => (await letters()).length > 0, { timeoutMs: 60000 });
    await waitFor('every other event acked', () => consumer.stats.acked >= 119, { timeoutMs: 60000 });
    // Each batch came as one delivery: its events are its parts, `<deliveryId>#<index>` (a batch split down to one
    // event goes as that event's own delivery).
    const firsts = [...firstDelivery.values()];
    expect(firsts.filter((id) => !/#\d+$/.test(id))).toEqual([]);
    expect(new Set(firsts.map((id) => id.split('#')[0])).size).toBeLessThan(60);
    expect((await letters()).map((l) => l.eventId)).toEqual([bad]);
    // Every event handled; each neighbour once (a batch split to isolate the refused event comes again: its handled
    // events are acked as duplicates), the refused one on each try.
    expect([...handled.keys()].sort()).toEqual(published.map((p) => p.id).sort());
    expect([...handled].filter(([id, n]) => id !== bad && n !== 1)).toEqual([]);
    expect(handled.get(bad)).toBeGreaterThan(1);
    expect(consumer.stats.duplicates).toBeGreaterThan(0);
  });
});

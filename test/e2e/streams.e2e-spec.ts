import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import type { Client } from '@temporalio/client';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

interface Delivery {
  deliveryId: string;
  event: { id: string; type: string };
}

/**
 * STREAM subscriptions on a real instance: long-poll and Server-Sent Events, explicit ack / nack / reject, the
 * in-flight window, stale answers refused, and the LOAD_BALANCE and BROADCAST policies.
 */
describe('stream transports', () => {
  const topic = uniqueTopic('streams');
  const instanceId = `streams-${randomUUID().slice(0, 6)}`;
  let instance: InstanceProcess;
  let api: string;
  let temporal: { client: Client; close(): Promise<void> };
  const json = { 'content-type': 'application/json' };

  beforeAll(async () => {
    temporal = await temporalClient();
    instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '3',
    });
    api = await instance.ready();
  });
  afterAll(async () => {
    await instance.stop();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await temporal.close();
  });

  const createStream = async (config: Record<string, unknown> = {}) => {
    const response = await fetch(`${api}/subscriptions`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ protocol: 'STREAM', topic, config }),
    });
    expect(response.status).toBe(201);
    return ((await response.json()) as { id: string }).id;
  };
  const publish = async (type: string, key: string = randomUUID()) => {
    const id = randomUUID();
    const response = await fetch(`${api}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id, source: '/streams', type, partitionkey: key }),
    });
    expect(response.status).toBe(202);
    return id;
  };
  const poll = async (sub: string, consumer: string, params: Record<string, string> = {}) => {
    const query = new URLSearchParams({ consumer, waitMs: '5000', ...params });
    const response = await fetch(`${api}/subscriptions/${sub}/poll?${query}`);
    expect(response.status).toBe(200);
    return ((await response.json()) as { deliveries: Delivery[] }).deliveries;
  };
  const answer = (sub: string, body: unknown) =>
    fetch(`${api}/subscriptions/${sub}/acks`, { method: 'POST', headers: json, body: JSON.stringify(body) });

  it('delivers by long-poll, takes acks, and moves on only after them', async () => {
    const sub = await createStream();
    const sent = [await publish('s.one'), await publish('s.two'), await publish('s.three')];
    const got: string[] = [];
    await waitFor('all three by long-poll', async () => {
      for (const d of await poll(sub, 'c1')) {
        got.push(d.event.id);
        expect((await answer(sub, { deliveryId: d.deliveryId, action: 'ack' })).status).toBe(200);
      }
      return sent.every((id) => got.includes(id));
    });
    expect(got.sort()).toEqual([...sent].sort());
  });

  it('redelivers a nacked event with a new delivery id and refuses the stale one', async () => {
    const sub = await createStream();
    const id = await publish('s.nack');
    const firstDelivery = await waitFor('the event', async () => (await poll(sub, 'c2'))[0]);
    expect(firstDelivery.event.id).toBe(id);
    // An extension settles nothing: the nack after it is accepted.
    expect(
      (await answer(sub, { deliveryId: firstDelivery.deliveryId, action: 'extend', deadlineMs: 60_000 })).status,
    ).toBe(200);
    expect((await answer(sub, { deliveryId: firstDelivery.deliveryId, action: 'nack', delayMs: 200 })).status).toBe(
      200,
    );
    const again = await waitFor('the redelivery', async () => (await poll(sub, 'c2'))[0]);
    expect(again.event.id).toBe(id);
    expect(again.deliveryId).not.toBe(firstDelivery.deliveryId);
    const stale = await answer(sub, { deliveryId: firstDelivery.deliveryId, action: 'ack' });
    expect(stale.status).toBe(409);
    expect(await stale.json()).toMatchObject({ code: 'UNKNOWN_DELIVERY', deliveryId: firstDelivery.deliveryId });
    expect((await answer(sub, { deliveryId: again.deliveryId, action: 'ack' })).status).toBe(200);
  });

  it('sends a rejected event straight to the dead-letter queue', async () => {
    const sub = await createStream();
    const id = await publish('s.reject');
    const d = await waitFor('the event', async () => (await poll(sub, 'c3'))[0]);
    expect((await answer(sub, { deliveryId: d.deliveryId, action: 'reject', reason: 'malformed order' })).status).toBe(
      200,
    );
    const letters = await waitFor('the dead letter', async () => {
      const { items } = (await (await fetch(`${api}/subscriptions/${sub}/dead-letters`)).json()) as {
        items: { eventId: string; lastError: string }[];
      };
      return items.length > 0 ? items : undefined;
    });
    expect(letters[0]).toMatchObject({ eventId: id, lastError: 'rejected by the stream client: malformed order' });
  });

  it('holds a client to its window of unanswered deliveries', async () => {
    const sub = await createStream();
    // Six events over three partitions: three lanes could each hand one out at once.
    for (let n = 0; n < 6; n++) await publish('s.window', `key-${n}`);
    const first = await waitFor('a delivery', async () => {
      const list = await poll(sub, 'narrow', { window: '1', max: '10' });
      return list.length > 0 ? list : undefined;
    });
    expect(first).toHaveLength(1);
    expect(await poll(sub, 'narrow', { window: '1', max: '10', waitMs: '300' })).toEqual([]);
    expect((await answer(sub, [{ deliveryId: first[0].deliveryId, action: 'ack' }])).status).toBe(200);
    expect(
      await waitFor('the next one after the ack', async () => {
        const list = await poll(sub, 'narrow', { window: '1', max: '10' });
        return list.length > 0 ? list : undefined;
      }),
    ).toHaveLength(1);
  });

  it('sends every event to every client under BROADCAST, and to one of them under LOAD_BALANCE', async () => {
    const broadcast = await createStream({ policy: 'BROADCAST' });
    const balanced = await createStream({ policy: 'LOAD_BALANCE' });
    // Both clients connect before the event exists.
    await Promise.all([
      poll(broadcast, 'a', { waitMs: '0' }),
      poll(broadcast, 'b', { waitMs: '0' }),
      poll(balanced, 'a', { waitMs: '0' }),
      poll(balanced, 'b', { waitMs: '0' }),
    ]);
    const id = await publish('s.policy');
    const [atA, atB] = await Promise.all([poll(broadcast, 'a'), poll(broadcast, 'b')]);
    expect([atA[0]?.event.id, atB[0]?.event.id]).toEqual([id, id]);
    const [balancedA, balancedB] = await Promise.all([
      poll(balanced, 'a', { waitMs: '2000' }),
      poll(balanced, 'b', { waitMs: '2000' }),
    ]);
    expect([...balancedA, ...balancedB].map((d) => d.event.id)).toEqual([id]);
  });

  it('sends each event under MULTICAST to the clients whose own filter matches it', async () => {
    const sub = await createStream({ policy: 'MULTICAST' });
    const onlyA = { filter: "type = 's.mc.a'" };
    const anyMc = { filter: "type LIKE 's.mc.%'" };
    await Promise.all([poll(sub, 'fa', { ...onlyA, waitMs: '0' }), poll(sub, 'fany', { ...anyMc, waitMs: '0' })]);
    const same = 'one-lane';
    const a = await publish('s.mc.a', same);
    const [atA, atAny] = await Promise.all([poll(sub, 'fa'), poll(sub, 'fany')]);
    expect([atA.map((d) => d.event.id), atAny.map((d) => d.event.id)]).toEqual([[a], [a]]);
    await answer(
      sub,
      [...atA, ...atAny].map((d) => ({ deliveryId: d.deliveryId, action: 'ack' })),
    );
    // Nobody's filter matches this one: it is settled without a delivery, and the lane moves on.
    await publish('s.other', same);
    const b = await publish('s.mc.b', same);
    const next = await poll(sub, 'fany');
    expect(next.map((d) => d.event.id)).toEqual([b]);
    expect(await poll(sub, 'fa', { waitMs: '300' })).toEqual([]);
    const bad = await fetch(`${api}/subscriptions/${sub}/poll?consumer=x&filter=${encodeURIComponent('type =')}`);
    expect(bad.status).toBe(400);
  });

  it('streams deliveries as Server-Sent Events', async () => {
    const sub = await createStream();
    const abort = new AbortController();
    const response = await fetch(`${api}/subscriptions/${sub}/events?window=5`, { signal: abort.signal });
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const id = await publish('s.sse');
    const reader = response.body!.getReader();
    let text = '';
    const message = await waitFor('a cloudevent message', async () => {
      const { value } = await reader.read();
      text += Buffer.from(value ?? new Uint8Array()).toString();
      const m = /event: cloudevent\ndata: (.+)\n\n/.exec(text);
      return m ? (JSON.parse(m[1]) as Delivery) : undefined;
    });
    expect(message.event.id).toBe(id);
    expect((await answer(sub, { deliveryId: message.deliveryId, action: 'ack' })).status).toBe(200);
    abort.abort();
  });

  it('streams over WebSocket, with answers on the same socket', async () => {
    const sub = await createStream();
    const socket = new WebSocket(`${api.replace('http', 'ws')}/subscriptions/${sub}/ws?window=4`);
    const messages: Record<string, unknown>[] = [];
    socket.on('message', (m) => messages.push(JSON.parse(String(m)) as Record<string, unknown>));
    await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
    try {
      const id = await publish('s.ws');
      const event = await waitFor(
        'the event on the socket',
        () => messages.find((m) => m.type === 'event') as (Delivery & { type: string }) | undefined,
      );
      expect(event.event.id).toBe(id);
      socket.send(JSON.stringify({ type: 'ack', deliveryId: event.deliveryId }));
      expect(await waitFor('the answer', () => messages.find((m) => m.type === 'answered'))).toEqual({
        type: 'answered',
        deliveryId: event.deliveryId,
        accepted: true,
      });
      socket.send(JSON.stringify({ type: 'ack', deliveryId: event.deliveryId }));
      await waitFor('the stale answer refused', () => messages.filter((m) => m.type === 'answered').length === 2);
      expect(messages.filter((m) => m.type === 'answered')[1]).toMatchObject({ accepted: false });
      socket.send('not json');
      expect(await waitFor('an error message', () => messages.find((m) => m.type === 'error'))).toMatchObject({
        code: 'MALFORMED_JSON',
      });
      // A refused answer names its delivery, so a client settles the answer it waits for.
      socket.send(JSON.stringify({ type: 'nack', deliveryId: event.deliveryId, delayMs: 7_200_000 }));
      expect(await waitFor('the refused answer', () => messages.filter((m) => m.type === 'error')[1])).toMatchObject({
        code: 'INVALID_REQUEST',
        deliveryId: event.deliveryId,
      });
    } finally {
      socket.close();
    }
  });

  it('streams over WebSocket in batches (?frames=batch): several deliveries a message, many answers in one', async () => {
    const sub = await createStream();
    const socket = new WebSocket(`${api.replace('http', 'ws')}/subscriptions/${sub}/ws?window=10&frames=batch`);
    const messages: Record<string, unknown>[] = [];
    socket.on('message', (m) => messages.push(JSON.parse(String(m)) as Record<string, unknown>));
    await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
    const of = (type: string) => messages.filter((m) => m.type === type);
    try {
      // One publish of five events of one key: one partition, one fetch, started by the lane at once.
      const key = randomUUID();
      const events = Array.from({ length: 5 }, () => ({
        specversion: '1.0',
        id: randomUUID(),
        source: '/streams',
        type: 's.batch',
        partitionkey: key,
      }));
      const published = await fetch(`${api}/events/publish?topic=${topic}`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents-batch+json' },
        body: JSON.stringify(events),
      });
      expect(published.status).toBe(202);
      const deliveries = await waitFor('the five events on the socket', () => {
        const all = of('events').flatMap((m) => m.deliveries as Delivery[]);
        return all.length === 5 ? all : undefined;
      });
      expect(deliveries.map((d) => d.event.id)).toEqual(events.map((e) => e.id));
      expect(of('event')).toEqual([]);
      expect(of('events').length).toBeLessThan(5);
      // One message answers four of them and an id nobody holds; one message answers it, in order.
      const [kept, ...acked] = deliveries;
      socket.send(
        JSON.stringify({
          type: 'answers',
          answers: [
            ...acked.map((d) => ({ type: 'ack', deliveryId: d.deliveryId })),
            { type: 'ack', deliveryId: '0.nope.1' },
          ],
        }),
      );
      expect(await waitFor('the answers answered', () => of('answered')[0])).toEqual({
        type: 'answered',
        answers: [
          ...acked.map((d) => ({ deliveryId: d.deliveryId, accepted: true })),
          { deliveryId: '0.nope.1', accepted: false },
        ],
      });
      // A message with one bad answer is refused whole: the good answer in it changed nothing.
      socket.send(
        JSON.stringify({
          type: 'answers',
          answers: [
            { type: 'ack', deliveryId: kept.deliveryId },
            { type: 'maybe', deliveryId: kept.deliveryId },
          ],
        }),
      );
      expect(await waitFor('an error message', () => of('error')[0])).toMatchObject({
        code: 'INVALID_REQUEST',
        field: 'action',
        index: 1,
      });
      socket.send(JSON.stringify({ type: 'answers', answers: [{ type: 'ack', deliveryId: kept.deliveryId }] }));
      expect(await waitFor('the kept one answered', () => of('answered')[1])).toEqual({
        type: 'answered',
        answers: [{ deliveryId: kept.deliveryId, accepted: true }],
      });
    } finally {
      socket.close();
    }
  });

  it('refuses a WebSocket to a subscription that is not a stream, as plain HTTP', async () => {
    const socket = new WebSocket(`${api.replace('http', 'ws')}/subscriptions/${randomUUID()}/ws`);
    const status = await new Promise<number>((resolve) => {
      socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      socket.once('open', () => resolve(101));
      socket.once('error', () => undefined);
    });
    expect(status).toBe(404);
    socket.terminate();
  });

  it('refuses stream transports on a webhook subscription and bad answers', async () => {
    const hook = await fetch(`${api}/subscriptions`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ protocol: 'HTTP', topic, sink: 'http://127.0.0.1:9/x', config: { trusted: true } }),
    });
    const { id } = (await hook.json()) as { id: string };
    expect((await fetch(`${api}/subscriptions/${id}/poll?waitMs=0`)).status).toBe(400);
    const sub = await createStream();
    expect((await answer(sub, { deliveryId: 'x', action: 'maybe' })).status).toBe(400);
    for (const deadlineMs of [undefined, 0, 3_600_001, 1.5, '1000']) {
      const bad = await answer(sub, { deliveryId: 'x', action: 'extend', deadlineMs });
      expect([bad.status, await bad.json()]).toEqual([
        400,
        expect.objectContaining({ code: 'INVALID_REQUEST', field: 'deadlineMs' }),
      ]);
    }
    expect((await answer(sub, { deliveryId: '0.nope.1', action: 'extend', deadlineMs: 1000 })).status).toBe(409);
    expect((await answer(sub, { deliveryId: '0.nope.1', action: 'ack' })).status).toBe(409);
    expect(
      (
        await fetch(`${api}/subscriptions`, {
          method: 'POST',
          headers: json,
          body: JSON.stringify({ protocol: 'STREAM', topic, sink: 'http://x' }),
        })
      ).status,
    ).toBe(400);
  });
});

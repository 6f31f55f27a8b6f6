import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import { testConfig, uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';

/**
 * An operator's view of a subscription's stream clients across the cluster, and disconnecting one wherever it is
 * held: two gateway-only instances on real Postgres, Kafka and Temporal; a client on A is listed and disconnected
 * through B (over the internal stream channel), a client on B through B itself.
 */
describe('stream clients: list and disconnect across instances (real servers)', () => {
  const topic = uniqueTopic('stream-clients');
  const suffix = randomUUID().slice(0, 8);
  let a: RunningInstance;
  let b: RunningInstance;
  let subscription: string;
  const closers: (() => void)[] = [];

  beforeAll(async () => {
    const config = (id: string) =>
      testConfig({ EVENTMESH_INSTANCE_ID: id, EVENTMESH_KAFKA_TOPICS: topic, EVENTMESH_HTTP_PORT: '0' });
    a = await startInstance(config(`clients-a-${suffix}`), { roles: ['gateway'] });
    b = await startInstance(config(`clients-b-${suffix}`), { roles: ['gateway'] });
    const created = await fetch(`${a.url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ protocol: 'STREAM', topic }),
    });
    subscription = ((await created.json()) as { id: string }).id;
  });

  afterAll(async () => {
    for (const close of closers) close();
    await a?.close();
    await b?.close();
  });

  interface ClientsView {
    subscriptionId: string;
    clients: {
      clientId: string;
      instance: string;
      holder: string;
      transport: string;
      window: number;
      inFlight: number;
      since: string;
    }[];
  }
  const clients = async (via: RunningInstance) =>
    (await (await fetch(`${via.url}/subscriptions/${subscription}/clients`)).json()) as ClientsView;

  /** An SSE client on `on`; `ended()` turns true once the server ended its stream. */
  async function sse(on: RunningInstance, window: number): Promise<{ ended: () => boolean }> {
    const abort = new AbortController();
    closers.push(() => abort.abort());
    const response = await fetch(`${on.url}/subscriptions/${subscription}/events?window=${window}`, {
      signal: abort.signal,
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    let ended = false;
    void (async () => {
      for (;;) {
        const { done } = await reader.read().catch(() => ({ done: true }));
        if (done) break;
      }
      ended = true;
    })();
    return { ended: () => ended };
  }

  it('lists the clients of every instance, and disconnects one held by another instance over the internal channel', async () => {
    const onA = await sse(a, 7);
    await waitFor('the SSE client of A listed by B', async () => (await clients(b)).clients.length === 1, {
      timeoutMs: 60000,
    });
    const [listed] = (await clients(b)).clients;
    expect(listed).toEqual({
      clientId: expect.stringMatching(/^sse:/),
      instance: `clients-a-${suffix}`,
      holder: expect.stringMatching(new RegExp(`^clients-a-${suffix}/\\d+$`)),
      transport: 'sse',
      window: 7,
      inFlight: 0,
      since: expect.any(String),
    });
    // A lists its own client the same way (from its hub).
    expect((await clients(a)).clients).toEqual([listed]);

    const socket = new WebSocket(`${b.url!.replace('http', 'ws')}/subscriptions/${subscription}/ws?window=3`);
    closers.push(() => socket.terminate());
    const socketClosed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
    await waitFor('both clients listed by A', async () => (await clients(a)).clients.length === 2, {
      timeoutMs: 60000,
    });
    const ws = (await clients(a)).clients.find((c) => c.transport === 'websocket')!;
    expect(ws).toMatchObject({ instance: `clients-b-${suffix}`, window: 3, inFlight: 0 });

    // Through B, the client held by A: over the internal channel.
    const removed = await fetch(
      `${b.url}/subscriptions/${subscription}/clients/${encodeURIComponent(listed.clientId)}`,
      { method: 'DELETE' },
    );
    expect(removed.status).toBe(200);
    expect(await removed.json()).toEqual({
      subscriptionId: subscription,
      clientId: listed.clientId,
      instance: `clients-a-${suffix}`,
      disconnected: true,
    });
    await waitFor('the SSE stream ended by A', () => onA.ended(), { timeoutMs: 60000 });

    // Through B, its own WebSocket client: closed with 4001.
    const own = await fetch(`${b.url}/subscriptions/${subscription}/clients/${encodeURIComponent(ws.clientId)}`, {
      method: 'DELETE',
    });
    expect(await own.json()).toEqual({
      subscriptionId: subscription,
      clientId: ws.clientId,
      instance: `clients-b-${suffix}`,
      disconnected: true,
    });
    expect(await socketClosed).toBe(4001);
    await waitFor(
      'no client listed',
      async () => (await clients(a)).clients.length === 0 && (await clients(b)).clients.length === 0,
      { timeoutMs: 60000 },
    );

    const gone = await fetch(`${a.url}/subscriptions/${subscription}/clients/${encodeURIComponent(ws.clientId)}`, {
      method: 'DELETE',
    });
    expect(gone.status).toBe(404);
    expect(await gone.json()).toMatchObject({ code: 'NOT_FOUND' });
    const unknown = await fetch(`${a.url}/subscriptions/${randomUUID()}/clients`);
    expect(unknown.status).toBe(404);
  }, 300000);
});

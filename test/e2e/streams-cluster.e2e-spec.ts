import { randomUUID } from 'node:crypto';
import { Client as PgClient } from 'pg';
import WebSocket from 'ws';
import type { Client } from '@temporalio/client';
import type { PartitionsView } from '@libs/ownership';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { testConfig, uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { resetOwnership, temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

interface Delivery {
  deliveryId: string;
  event: { id: string; type: string };
}

const json = { 'content-type': 'application/json' };

/** A stream client that records what it is handed and, while `acking`, acks it at once. */
abstract class StreamClient {
  readonly received: Delivery[] = [];
  acking = true;
  protected constructor(
    readonly api: string,
    readonly sub: string,
  ) {}
  ids(): string[] {
    return this.received.map((d) => d.event.id);
  }
  protected take(d: Delivery): void {
    this.received.push(d);
    if (this.acking) void this.ack(d);
  }
  abstract ack(d: Delivery): Promise<void>;
  abstract close(): void;
}

class WsClient extends StreamClient {
  private socket!: WebSocket;
  /** The server's `answered` messages, in order: a delivery id and whether its answer (or extension) was accepted. */
  readonly answered: { deliveryId: string; accepted: boolean }[] = [];
  static async open(api: string, sub: string, window = 5): Promise<WsClient> {
    const client = new WsClient(api, sub);
    client.socket = new WebSocket(`${api.replace('http', 'ws')}/subscriptions/${sub}/ws?window=${window}`);
    client.socket.on('message', (m) => {
      const message = JSON.parse(String(m)) as Delivery & { type: string };
      if (message.type === 'event') client.take(message);
      if (message.type === 'answered')
        client.answered.push({
          deliveryId: message.deliveryId,
          accepted: (message as unknown as { accepted: boolean }).accepted,
        });
    });
    client.socket.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => client.socket.once('open', () => resolve()).once('error', reject));
    return client;
  }
  ack(d: Delivery): Promise<void> {
    this.send({ type: 'ack', deliveryId: d.deliveryId });
    return Promise.resolve();
  }
  send(message: Record<string, unknown>): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }
  close(): void {
    this.socket.terminate();
  }
}

class SseClient extends StreamClient {
  private readonly abort = new AbortController();
  static async open(api: string, sub: string, window = 5): Promise<SseClient> {
    const client = new SseClient(api, sub);
    const response = await fetch(`${api}/subscriptions/${sub}/events?window=${window}`, {
      signal: client.abort.signal,
    });
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const reader = response.body!.getReader();
    void (async () => {
      let text = '';
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) return;
        text += Buffer.from(value ?? new Uint8Array()).toString();
        for (
          let m = /event: cloudevent\ndata: (.+)\n\n/.exec(text);
          m;
          m = /event: cloudevent\ndata: (.+)\n\n/.exec(text)
        ) {
          text = text.slice(m.index + m[0].length);
          client.take(JSON.parse(m[1]) as Delivery);
        }
      }
    })();
    return client;
  }
  async ack(d: Delivery): Promise<void> {
    await fetch(`${this.api}/subscriptions/${this.sub}/acks`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ deliveryId: d.deliveryId, action: 'ack' }),
    }).catch(() => undefined);
  }
  close(): void {
    this.abort.abort();
  }
}

const publisher = (topic: string) => {
  let seq = 0;
  return async (via: string, count: number): Promise<string[]> => {
    const acked: string[] = [];
    for (let n = 0; n < count; n++) {
      const id = `c-${++seq}-${randomUUID().slice(0, 6)}`;
      const response = await fetch(`${via}/events/publish?topic=${topic}`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({
          specversion: '1.0',
          id,
          source: '/cluster',
          type: 'cluster.n',
          partitionkey: `k${seq}`,
        }),
      }).catch(() => undefined);
      if (response?.status === 202) acked.push(id);
    }
    return acked;
  };
};

const createStream = async (api: string, topic: string, config: Record<string, unknown> = {}): Promise<string> => {
  const response = await fetch(`${api}/subscriptions`, {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ protocol: 'STREAM', topic, config }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { id: string }).id;
};

const duplicatesOf = (ids: string[]) => ids.length - new Set(ids).size;

/**
 * Streams in PARTITION_OWNED_PULL across instances (docs/topologies.md#streams-in-every-topology): A runs only the
 * gateway (it owns no partition and holds the clients), B and C own the partitions and forward to A over the
 * internal channel. The cases run in order on one set of instances.
 */
describe('streams across instances: PARTITION_OWNED_PULL', () => {
  const topic = uniqueTopic('streams-owned');
  const publish = publisher(topic);
  const run = randomUUID().slice(0, 6);
  const ids = { a: `sa-${run}`, b: `sb-${run}`, c: `sc-${run}` };
  const owned = {
    EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL',
    EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000',
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '4',
  };
  let a: InstanceProcess;
  let b: InstanceProcess;
  let c: InstanceProcess;
  let temporal: { client: Client; close(): Promise<void> };
  const clients: StreamClient[] = [];

  /** This spec's topic's partitions: the instances own those of every topic the runtime serves (other specs' too). */
  const view = async (via: string): Promise<PartitionsView> => {
    const all = (await (await fetch(`${via}/admin/partitions`)).json()) as PartitionsView;
    return { ...all, partitions: all.partitions.filter((p) => p.topic === topic) };
  };
  const ownedBy = (via: string, members: string[]) =>
    waitFor(
      `the partitions to be owned by ${members.join(', ')}`,
      async () => {
        const v = await view(via);
        return v.partitions.length === 4 &&
          v.partitions.every((p) => p.polling && members.includes(p.owner ?? '')) &&
          new Set(v.partitions.map((p) => p.owner)).size === members.length
          ? v
          : false;
      },
      { timeoutMs: 60000, intervalMs: 250 },
    );

  beforeAll(async () => {
    temporal = await temporalClient();
    await resetOwnership(temporal.client);
    b = InstanceProcess.spawn({ ...owned, EVENTMESH_INSTANCE_ID: ids.b });
    c = InstanceProcess.spawn({ ...owned, EVENTMESH_INSTANCE_ID: ids.c });
    a = InstanceProcess.spawn({ ...owned, EVENTMESH_INSTANCE_ID: ids.a, EVENTMESH_INSTANCE_ROLES: 'gateway' });
    await Promise.all([a.ready(), b.ready(), c.ready()]);
    await ownedBy(b.url!, [ids.b, ids.c]);
  }, 120000);
  afterAll(async () => {
    for (const client of clients) client.close();
    await Promise.all([a, b, c].map((i) => i?.stop()));
    await resetOwnership(temporal.client);
    await temporal.close();
  });

  it('refuses the internal channel without a cluster token (401), before anything else', async () => {
    for (const headers of [{}, { 'x-eventmesh-cluster-token': 'v1.test.eA.1.00' }]) {
      const socket = new WebSocket(`${a.url!.replace('http', 'ws')}/internal/streams/channel`, { headers });
      const status = await new Promise<number>((resolve) => {
        socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        socket.once('open', () => resolve(101));
        socket.once('error', () => undefined);
      });
      socket.terminate();
      expect(status).toBe(401);
    }
  });

  it('delivers every partition to a WebSocket and an SSE client on a gateway-only instance, and loses nothing acknowledged when an owner is killed mid-stream', async () => {
    const sub = await createStream(b.url!, topic, { ackTimeoutMs: 10000 });
    const ws = await WsClient.open(a.url!, sub);
    const sse = await SseClient.open(a.url!, sub);
    clients.push(ws, sse);
    const first = await publish(a.url!, 10);
    await waitFor(
      'the first events to be delivered',
      () => first.every((id) => ws.ids().includes(id) || sse.ids().includes(id)),
      { timeoutMs: 60000 },
    );
    // Both transports got events; every delivery id carries a partition lease's epoch (1 or more), not the hub's 0.
    expect(ws.received.length).toBeGreaterThan(0);
    expect(sse.received.length).toBeGreaterThan(0);
    expect([...ws.received, ...sse.received].every((d) => Number(d.deliveryId.split('.')[0]) >= 1)).toBe(true);

    // B dies while events are published and in flight: publishing goes on, and B is killed once 20 more arrived.
    const publishing = publish(a.url!, 60);
    const seen = ws.received.length + sse.received.length;
    await waitFor('deliveries under way', () => ws.received.length + sse.received.length >= seen + 20, {
      timeoutMs: 60000,
      intervalMs: 20,
    });
    b.child.kill('SIGKILL');
    const acked = [...first, ...(await publishing)];
    await ownedBy(c.url!, [ids.c]);
    await waitFor(
      'every acknowledged publish to be delivered after B died',
      () => acked.every((id) => ws.ids().includes(id) || sse.ids().includes(id)),
      { timeoutMs: 90000, intervalMs: 250 },
    );
    const all = [...ws.ids(), ...sse.ids()];
    console.log(
      `owner SIGKILL: ${acked.length} acknowledged, ${new Set(all).size} delivered, ${duplicatesOf(all)} duplicates (ws ${ws.received.length}, sse ${sse.received.length})`,
    );
    expect(acked.filter((id) => !all.includes(id))).toEqual([]);
  }, 180000);

  it('serves long-poll through the gateway-only instance, acks included', async () => {
    const sub = await createStream(a.url!, topic);
    await fetch(`${a.url}/subscriptions/${sub}/poll?consumer=lp&waitMs=0`);
    const sent = await publish(a.url!, 5);
    const got: string[] = [];
    await waitFor(
      'the events by long-poll on A',
      async () => {
        const response = await fetch(`${a.url}/subscriptions/${sub}/poll?consumer=lp&waitMs=2000&max=10`);
        const { deliveries } = (await response.json()) as { deliveries: Delivery[] };
        for (const d of deliveries) {
          got.push(d.event.id);
          const ack = await fetch(`${a.url}/subscriptions/${sub}/acks`, {
            method: 'POST',
            headers: json,
            body: JSON.stringify({ deliveryId: d.deliveryId, action: 'ack' }),
          });
          expect(ack.status).toBe(200);
        }
        return sent.every((id) => got.includes(id));
      },
      { timeoutMs: 60000 },
    );
    // Acked: nothing comes again.
    const again = (await (await fetch(`${a.url}/subscriptions/${sub}/poll?consumer=lp&waitMs=1500&max=10`)).json()) as {
      deliveries: Delivery[];
    };
    expect(again.deliveries).toEqual([]);
  }, 90000);

  it('takes answers posted to an instance other than the one holding the client (a load balancer in front): ack and nack reach the holder, a stale one is 409', async () => {
    const sub = await createStream(a.url!, topic);
    await fetch(`${a.url}/subscriptions/${sub}/poll?consumer=lb&waitMs=0`);
    const sent = await publish(a.url!, 4);
    const answer = (url: string, deliveryId: string, action: string) =>
      fetch(`${url}/subscriptions/${sub}/acks`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ deliveryId, action, delayMs: 0 }),
      });
    const held: Delivery[] = [];
    await waitFor(
      'the events by long-poll on A',
      async () => {
        const response = await fetch(`${a.url}/subscriptions/${sub}/poll?consumer=lb&waitMs=2000&max=10`);
        held.push(...((await response.json()) as { deliveries: Delivery[] }).deliveries);
        return sent.every((id) => held.some((d) => d.event.id === id));
      },
      { timeoutMs: 60000 },
    );
    // Posted to C (B died in an earlier case), which holds no client: the first event nacked, so it comes again on
    // A, and that delivery acked; the rest acked.
    const [nacked, ...rest] = held;
    expect((await answer(c.url!, nacked.deliveryId, 'nack')).status).toBe(200);
    for (const d of rest) {
      const ack = await answer(c.url!, d.deliveryId, 'ack');
      expect([ack.status, await ack.json()]).toEqual([200, { deliveryId: d.deliveryId, accepted: true }]);
    }
    const again = await waitFor(
      'the nacked event again on A',
      async () => {
        const response = await fetch(`${a.url}/subscriptions/${sub}/poll?consumer=lb&waitMs=2000&max=10`);
        return ((await response.json()) as { deliveries: Delivery[] }).deliveries.find(
          (d) => d.event.id === nacked.event.id,
        );
      },
      { timeoutMs: 60000 },
    );
    expect((await answer(c.url!, again.deliveryId, 'ack')).status).toBe(200);
    // Settled: a second answer, wherever posted, is stale; and nothing comes again.
    const stale = await answer(c.url!, again.deliveryId, 'ack');
    expect([stale.status, await stale.json()]).toEqual([
      409,
      expect.objectContaining({ code: 'UNKNOWN_DELIVERY', deliveryId: again.deliveryId }),
    ]);
    const after = (await (await fetch(`${a.url}/subscriptions/${sub}/poll?consumer=lb&waitMs=1500&max=10`)).json()) as {
      deliveries: Delivery[];
    };
    expect(after.deliveries).toEqual([]);
  }, 120000);

  it("keeps a delivery held on A while its client extends it, past its ack timeout and the owner's wait: delivered once, its ack accepted", async () => {
    const sub = await createStream(a.url!, topic, { ackTimeoutMs: 1000 });
    const ws = await WsClient.open(a.url!, sub);
    clients.push(ws);
    ws.acking = false;
    const [id] = await publish(a.url!, 1);
    const held = await waitFor('the event on A', () => ws.received.find((d) => d.event.id === id), {
      timeoutMs: 60000,
    });
    // 10 s held, extended every second to 5 s ahead: past the ack timeout (1 s), and past how long the owner (C)
    // waits for a forwarded delivery's answer (the ack timeout and 5 s) unless the extensions reach it too.
    const extensions = 10;
    for (let i = 0; i < extensions; i++) {
      ws.send({ type: 'extend', deliveryId: held.deliveryId, deadlineMs: 5000 });
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    ws.send({ type: 'ack', deliveryId: held.deliveryId });
    await waitFor('the ack answered', () => ws.answered.length === extensions + 1, { timeoutMs: 60000 });
    expect(ws.answered).toEqual(
      Array.from({ length: extensions + 1 }, () => ({ deliveryId: held.deliveryId, accepted: true })),
    );
    // Settled by the ack: nothing comes again.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(ws.received.filter((d) => d.event.id === id)).toHaveLength(1);
  }, 120000);

  it('hands the unacked events of a killed client instance to a client on another instance', async () => {
    const sub = await createStream(c.url!, topic, { ackTimeoutMs: 120000 });
    const holding = await WsClient.open(a.url!, sub, 10);
    holding.acking = false;
    clients.push(holding);
    const held = await publish(c.url!, 4);
    await waitFor("A's client to hold the events unacked", () => held.every((id) => holding.ids().includes(id)), {
      timeoutMs: 60000,
    });
    const onC = await WsClient.open(c.url!, sub, 10);
    clients.push(onC);
    a.child.kill('SIGKILL');
    // Far sooner than the ack timeout (120 s): the lost channel settles them as gone, and they go to C's client.
    await waitFor("A's unacked events to reach the client on C", () => held.every((id) => onC.ids().includes(id)), {
      timeoutMs: 30000,
    });
    const later = await publish(c.url!, 3);
    await waitFor('new events to reach the client on C', () => later.every((id) => onC.ids().includes(id)), {
      timeoutMs: 30000,
    });
  }, 120000);
});

/** LOCAL_STICKY_PULL: the instance a subscription is pinned to forwards to a client connected to another one. */
describe('streams across instances: LOCAL_STICKY_PULL', () => {
  const topic = uniqueTopic('streams-sticky');
  const publish = publisher(topic);
  const run = randomUUID().slice(0, 6);
  const ids = [`s1-${run}`, `s2-${run}`, `s3-${run}`];
  let pinned: InstanceProcess;
  let other: InstanceProcess;
  let temporal: { client: Client; close(): Promise<void> };
  let client: WsClient | undefined;
  const more: WsClient[] = [];

  beforeAll(async () => {
    temporal = await temporalClient();
    pinned = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: ids[0],
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '2',
    });
    other = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: ids[1],
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '2',
    });
    await Promise.all([pinned.ready(), other.ready()]);
  }, 90000);
  afterAll(async () => {
    client?.close();
    for (const c of more) c.close();
    await Promise.all([pinned?.stop(), other?.stop()]);
    await terminateWorkflows(temporal.client, ids.map(dispatchWorkflowIdOf));
    await temporal.close();
  });

  it('delivers to a client on an instance other than the pinned one, and takes its acks', async () => {
    const sub = await createStream(pinned.url!, topic);
    const view = (await (await fetch(`${other.url}/subscriptions/${sub}`)).json()) as { instance: string };
    expect(view.instance).toBe(ids[0]);
    client = await WsClient.open(other.url!, sub);
    const sent = await publish(pinned.url!, 6);
    await waitFor('the events on the other instance', () => sent.every((id) => client!.ids().includes(id)), {
      timeoutMs: 60000,
    });
    expect(duplicatesOf(client.ids())).toBe(0);
  }, 90000);

  it('serves clients spread over the processes of a gateway-only instance with several gateway processes', async () => {
    const gateways = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: ids[2],
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '2',
      EVENTMESH_INSTANCE_ROLES: 'gateway',
      EVENTMESH_HTTP_PROCESSES: '2',
    });
    try {
      const url = await gateways.ready();
      const sub = await createStream(pinned.url!, topic);
      for (let n = 0; n < 4; n++) more.push(await WsClient.open(url, sub, 2));
      const pg = testConfig().postgres;
      const db = new PgClient({
        host: pg.host,
        port: pg.port,
        user: pg.user,
        password: pg.password,
        database: pg.database,
      });
      await db.connect();
      try {
        // The port's round robin spread the four connections over both processes: two holders of one instance.
        await waitFor('both gateway processes to hold clients', async () => {
          const { rows } = await db.query<{ holder: string }>(
            'SELECT holder FROM stream_presence WHERE subscription_id = $1 AND instance_id = $2',
            [sub, ids[2]],
          );
          return rows.length === 2;
        });
      } finally {
        await db.end();
      }
      const sent = await publish(pinned.url!, 12);
      const got = () => more.flatMap((c) => c.ids());
      await waitFor('the events at the clients of both processes', () => sent.every((id) => got().includes(id)), {
        timeoutMs: 60000,
      });
      expect(more.filter((c) => c.received.length > 0).length).toBeGreaterThan(1);
    } finally {
      for (const c of more) c.close();
      await gateways.stop();
    }
  }, 120000);
});

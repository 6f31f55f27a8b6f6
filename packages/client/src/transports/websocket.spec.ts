import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { HttpClient } from '../http';
import type { WireDelivery } from './connection';
import { connectWebSocket } from './websocket';

/** A runtime's WebSocket stream route, as far as the transport sees it: what it was asked for, and what it got. */
async function fakeRuntime() {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((r) => server.once('listening', () => r()));
  const received: Record<string, unknown>[] = [];
  const urls: string[] = [];
  let socket!: WebSocket;
  const connected = new Promise<void>((resolve) =>
    server.on('connection', (s, request) => {
      socket = s;
      urls.push(request.url ?? '');
      s.on('message', (m) => received.push(JSON.parse(String(m)) as Record<string, unknown>));
      resolve();
    }),
  );
  const http = new HttpClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  return { server, received, urls, connected, http, send: (m: unknown) => socket.send(JSON.stringify(m)) };
}

const until = async (what: string, probe: () => boolean): Promise<void> => {
  for (let i = 0; i < 2500 && !probe(); i++) await new Promise((r) => setTimeout(r, 2));
  if (!probe()) throw new Error(`never: ${what}`);
};
const event = (id: string) => ({ specversion: '1.0', id, source: '/t', type: 't' });

describe('WebSocket transport', () => {
  let runtime: Awaited<ReturnType<typeof fakeRuntime>>;
  beforeEach(async () => (runtime = await fakeRuntime()));
  afterEach(async () => new Promise<void>((r) => runtime.server.close(() => r())));
  const connect = async (batchFrames = true) => {
    const got: WireDelivery[] = [];
    const connection = await connectWebSocket({
      http: runtime.http,
      subscriptionId: 'sub',
      window: 10,
      consumerName: 'c',
      batchFrames,
      onDelivery: (d) => got.push(d),
    });
    await runtime.connected;
    return { got, connection };
  };

  it('asks for one frame per delivery unless batched frames are asked for (latency first)', async () => {
    const { connection } = await connect(false);
    expect(new URL(runtime.urls[0], 'ws://x').searchParams.has('frames')).toBe(false);
    connection.close();
  });

  it('with batchFrames, asks for batched frames, takes each delivery of an `events` message, and answers a turn in one message', async () => {
    const { got, connection } = await connect();
    expect(new URL(runtime.urls[0], 'ws://x').searchParams.get('frames')).toBe('batch');
    const ids = ['d1', 'd2', 'd3'];
    runtime.send({ type: 'events', deliveries: ids.map((deliveryId) => ({ deliveryId, event: event(deliveryId) })) });
    await until('three deliveries', () => got.length === 3);
    expect(got.map((d) => d.deliveryId)).toEqual(ids);
    const answers = [
      connection.answer({ deliveryId: 'd1', action: 'ack' }),
      connection.answer({ deliveryId: 'd2', action: 'nack', delayMs: 5 }),
      connection.answer({ deliveryId: 'd3', action: 'reject', reason: 'bad' }),
    ];
    await until('an answers message', () => runtime.received.length > 0);
    runtime.send({
      type: 'answered',
      answers: [
        { deliveryId: 'd1', accepted: true },
        { deliveryId: 'd2', accepted: true },
        { deliveryId: 'd3', accepted: false },
      ],
    });
    expect(await Promise.all(answers)).toEqual([true, true, false]);
    expect(runtime.received).toEqual([
      {
        type: 'answers',
        answers: [
          { type: 'ack', deliveryId: 'd1' },
          { type: 'nack', deliveryId: 'd2', delayMs: 5 },
          { type: 'reject', deliveryId: 'd3', reason: 'bad' },
        ],
      },
    ]);
    connection.close();
    expect(await connection.ended).toBeUndefined();
  });

  it('answers each delivery in its own message to a runtime that sends single `event` frames', async () => {
    const { got, connection } = await connect();
    for (const deliveryId of ['d1', 'd2']) runtime.send({ type: 'event', deliveryId, event: event(deliveryId) });
    await until('two deliveries', () => got.length === 2);
    const answers = got.map((d) => connection.answer({ deliveryId: d.deliveryId, action: 'ack' }));
    await until('two answers', () => runtime.received.length === 2);
    for (const deliveryId of ['d1', 'd2']) runtime.send({ type: 'answered', deliveryId, accepted: true });
    expect(await Promise.all(answers)).toEqual([true, true]);
    expect(runtime.received).toEqual([
      { type: 'ack', deliveryId: 'd1' },
      { type: 'ack', deliveryId: 'd2' },
    ]);
    connection.close();
  });

  it('hands over the frames the runtime sends as the socket opens (in the same read as the handshake)', async () => {
    runtime.server.on('connection', (s) =>
      s.send(JSON.stringify({ type: 'event', deliveryId: 'd0', event: event('d0') })),
    );
    const { got, connection } = await connect(false);
    await until('the first frame', () => got.length === 1);
    expect(got.map((d) => d.deliveryId)).toEqual(['d0']);
    connection.close();
  });

  it('settles an answer the runtime refuses as not taken, and the answers after it by their own confirmations', async () => {
    const { got, connection } = await connect(false);
    for (const deliveryId of ['d1', 'd2']) runtime.send({ type: 'event', deliveryId, event: event(deliveryId) });
    await until('two deliveries', () => got.length === 2);
    const refused = connection.answer({ deliveryId: 'd1', action: 'nack', delayMs: 7_200_000 });
    const taken = connection.answer({ deliveryId: 'd2', action: 'ack' });
    await until('two answers', () => runtime.received.length === 2);
    runtime.send({ type: 'error', code: 'INVALID_REQUEST', message: 'delayMs', deliveryId: 'd1' });
    runtime.send({ type: 'answered', deliveryId: 'd2', accepted: true });
    expect(await Promise.all([refused, taken])).toEqual([false, true]);
    connection.close();
  });
});

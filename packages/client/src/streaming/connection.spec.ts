import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { HttpClient } from '../http';
import type { SessionConnection } from './connection';
import { SessionClosedError } from './errors';
import { decodeFrame, encodeFrame, type Frame } from './frame';
import { Streaming } from './streaming';

/**
 * The runtime's `/sessions/ws` as far as the connection sees it: `serve` is answered `served`, `subscribe` `subscribed`
 * (a second subscription to a name on one connection is refused SESSION_EXISTS, as libs/sessions/live-sessions.ts does).
 */
async function fakeRuntime() {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((r) => server.once('listening', () => r()));
  const sockets: WebSocket[] = [];
  const received: { socket: number; frame: Frame }[] = [];
  server.on('connection', (socket) => {
    const index = sockets.push(socket) - 1;
    const subscribed = new Set<string>();
    socket.on('message', (raw: Buffer) => {
      const frame = decodeFrame(raw)!;
      received.push({ socket: index, frame });
      if (frame.kind === 'serve')
        socket.send(encodeFrame({ kind: 'served', id: frame.id, attributes: { replica: 'r' } }));
      if (frame.kind === 'subscribe') {
        if (subscribed.has(frame.id)) {
          const attributes = { code: 'SESSION_EXISTS', status: 409, message: 'already subscribed', scope: 'open' };
          return socket.send(encodeFrame({ kind: 'error', id: frame.id, attributes }));
        }
        subscribed.add(frame.id);
        socket.send(
          encodeFrame({
            kind: 'subscribed',
            id: frame.id,
            call: 1,
            n: 0,
            attributes: { recovered: true, members: '[]', window: 1000 },
          }),
        );
      }
    });
  });
  const http = new HttpClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  return {
    server,
    sockets,
    http,
    last: () => sockets[sockets.length - 1],
    kinds: (kind: Frame['kind']) => received.filter((r) => r.frame.kind === kind),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const until = async (what: string, probe: () => boolean): Promise<void> => {
  for (let i = 0; i < 2500 && !probe(); i++) await sleep(2);
  if (!probe()) throw new Error(`never: ${what}`);
};
const connectionOf = (streaming: Streaming) => (streaming as unknown as { connection: SessionConnection }).connection;

describe('the sessions connection (SessionConnection)', () => {
  let runtime: Awaited<ReturnType<typeof fakeRuntime>>;
  let streaming: Streaming | undefined;
  beforeEach(async () => (runtime = await fakeRuntime()));
  afterEach(async () => {
    streaming?.close();
    streaming = undefined;
    for (const socket of runtime.sockets) socket.terminate();
    await new Promise<void>((r) => runtime.server.close(() => r()));
  });

  it('refuses heartbeat and reconnect delays that would spin or flap (NaN, 0, negative, fractional, too long)', () => {
    for (const bad of [0, -1, NaN, Infinity, 0.5, 2 ** 31]) {
      expect(() => new Streaming(runtime.http, { heartbeatMs: bad })).toThrow(RangeError);
      expect(() => new Streaming(runtime.http, { reconnectMs: bad })).toThrow(RangeError);
    }
    expect(() => new Streaming(runtime.http, { transport: 'http' as 'sse' })).toThrow(RangeError);
    expect(() => new Streaming(runtime.http, { heartbeatMs: 1000, reconnectMs: 100, transport: 'sse' })).not.toThrow();
  });

  it('ends the subscriptions and agents waiting to reconnect when closed while the connection is down', async () => {
    streaming = new Streaming(runtime.http, { transport: 'websocket', reconnectMs: 5000 });
    const agent = await streaming.serve('echo', () => undefined);
    const subscription = await streaming.subscribeSession('prices');
    const next = subscription[Symbol.asyncIterator]().next();
    runtime.last().terminate();
    await until('the connection is lost', () => !connectionOf(streaming!).isOpen && agent.state === 'reconnecting');
    streaming.close();
    await expect(Promise.race([next, sleep(1000).then(() => 'still waiting')])).rejects.toBeInstanceOf(
      SessionClosedError,
    );
    expect(agent.state).toBe('closed');
    expect(runtime.sockets).toHaveLength(1);
  });

  it('backs off more each time the runtime accepts and drops at once, instead of reconnecting at the first delay', async () => {
    streaming = new Streaming(runtime.http, { transport: 'websocket', reconnectMs: 10 });
    await streaming.serve('echo', () => undefined);
    const before = runtime.sockets.length;
    runtime.server.on('connection', (socket) => setImmediate(() => socket.terminate()));
    runtime.last().terminate();
    await sleep(500);
    // At 10 ms (jittered 5-15) each time, 30 or more in 500 ms; doubling from 10 ms, at most 8.
    const reconnects = runtime.sockets.length - before;
    expect(reconnects).toBeGreaterThan(2);
    expect(reconnects).toBeLessThan(15);
  });

  it('subscribes again once, not once per loss, when the connection was lost twice before the reconnect', async () => {
    streaming = new Streaming(runtime.http, { transport: 'websocket', reconnectMs: 300 });
    const connection = connectionOf(streaming);
    const subscription = await streaming.subscribeSession('prices');
    const next = subscription[Symbol.asyncIterator]().next();
    runtime.last().terminate();
    await until('the connection is lost', () => !connection.isOpen);
    // Something else of the client (an openSession) connects before the reconnect timer fires; then that is lost too.
    await connection.ensure();
    runtime.last().terminate();
    await until('the connection is lost again', () => !connection.isOpen);
    await until('subscribed again', () => runtime.kinds('subscribe').length >= 2);
    await sleep(1000);
    const last = runtime.sockets.length - 1;
    expect(runtime.kinds('subscribe').filter((r) => r.socket === last)).toHaveLength(1);
    runtime.last().send(
      encodeFrame({
        kind: 'chunk',
        id: 'prices',
        call: 1,
        n: 1,
        attributes: { publisher: 'p' },
        data: Buffer.from('a'),
      }),
    );
    expect((await next).value?.data.toString()).toBe('a');
  });
});

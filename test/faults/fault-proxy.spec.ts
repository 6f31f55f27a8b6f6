import { createServer, Server, Socket, connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { FaultProxy } from './fault-proxy';
import { TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait-for';

/** An echo server on loopback: what the proxy fronts in these tests. */
async function echoServer(): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const open = new Set<Socket>();
  const server = createServer((s) => {
    open.add(s);
    s.on('close', () => open.delete(s));
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A client through the proxy that records what comes back and how it ended. */
async function client(
  address: string,
): Promise<{ socket: Socket; received: () => string; ended: () => string | undefined }> {
  const [host, port] = address.split(':');
  const socket = connect(Number(port), host);
  let text = '';
  let end: string | undefined;
  socket.on('data', (d) => (text += d.toString()));
  socket.on('error', (e: NodeJS.ErrnoException) => (end = e.code ?? e.message));
  socket.on('close', () => (end ??= 'closed'));
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return { socket, received: () => text, ended: () => end };
}

describe('fault proxy', () => {
  let echo: Awaited<ReturnType<typeof echoServer>>;
  let proxy: FaultProxy;
  const sockets: Socket[] = [];
  const open = async () => {
    const c = await client(proxy.address);
    sockets.push(c.socket);
    return c;
  };

  beforeEach(async () => {
    echo = await echoServer();
    proxy = new FaultProxy('127.0.0.1', echo.port);
    await proxy.start();
  });
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await proxy.stop();
    await echo.close();
  });

  it('forwards both ways', async () => {
    const c = await open();
    c.socket.write('hello');
    await waitFor('the echo', () => c.received() === 'hello');
    expect(proxy.counters).toMatchObject({ connections: 1, bytesUp: 5, bytesDown: 5 });
  });

  // The latency is the proxy's promise, so the durations are asserted, on both sides of it. A lower bound cannot
  // fail on a loaded machine (the proxy holds each chunk until its due time on the clock, and load only adds to
  // that). An upper bound is "less than one latency": a link still delayed either way takes at least that, while
  // a plain loopback round trip takes a few milliseconds (10 of them for the test's polling): a margin of ~25
  // times, which a loaded 2-core host does not use up.
  it('delays every chunk by the latency, in order, and heals back to none', async () => {
    const latencyMs = 300;
    const c = await open();
    proxy.latency(latencyMs);
    const sent = Date.now();
    c.socket.write('a');
    c.socket.write('b');
    await waitFor('the echo', () => c.received() === 'ab', { timeoutMs: 60000, intervalMs: 10 });
    // Up and down are each delayed: at least two latencies for the round trip.
    expect(Date.now() - sent).toBeGreaterThanOrEqual(2 * latencyMs - 10);
    proxy.heal();
    expect(proxy.state).toMatchObject({ chunkLatencyMs: 0, connectLatencyMs: 0 });
    const again = Date.now();
    c.socket.write('c');
    await waitFor('the echo', () => c.received() === 'abc', { timeoutMs: 60000, intervalMs: 10 });
    expect(Date.now() - again).toBeLessThan(latencyMs);
  }, 180000);

  it('delays only the opening of new connections with a per-connection latency', async () => {
    const latencyMs = 400;
    proxy.latency(latencyMs, { perConnection: true });
    expect(proxy.state).toMatchObject({ chunkLatencyMs: 0, connectLatencyMs: latencyMs });
    const opened = Date.now();
    const c = await open();
    c.socket.write('x');
    await waitFor('the echo', () => c.received() === 'x', { timeoutMs: 60000, intervalMs: 10 });
    expect(Date.now() - opened).toBeGreaterThanOrEqual(latencyMs - 10);
    const next = Date.now();
    c.socket.write('y');
    await waitFor('the echo', () => c.received() === 'xy', { timeoutMs: 60000, intervalMs: 10 });
    expect(Date.now() - next).toBeLessThan(latencyMs);
  }, 180000);

  it('cut drops open connections and refuses new ones until healed', async () => {
    const c = await open();
    proxy.cut();
    await waitFor('the open connection dropped', () => c.ended());
    const refused = await open();
    await waitFor('the new connection closed', () => refused.ended());
    proxy.heal();
    const d = await open();
    d.socket.write('back');
    await waitFor('the echo after heal', () => d.received() === 'back');
  });

  it('hold (half-open) forwards nothing and closes nothing, then delivers what it held in order on heal', async () => {
    const c = await open();
    proxy.hold();
    c.socket.write('one');
    const held = await open();
    held.socket.write('two');
    // Nothing comes back while held, and neither connection is closed.
    await expect(
      waitFor('any echo while held', () => c.received() !== '' || held.received() !== '', { timeoutMs: 500 }),
    ).rejects.toThrow('timed out');
    expect([c.ended(), held.ended()]).toEqual([undefined, undefined]);
    proxy.heal();
    await waitFor('both echoes after heal', () => c.received() === 'one' && held.received() === 'two');
  });

  it('strand black-holes the open connections for good (not healed, not closed) and lets new ones through', async () => {
    const c = await open();
    c.socket.write('a');
    await waitFor('the echo', () => c.received() === 'a');
    proxy.strand();
    c.socket.write('lost');
    const d = await open();
    d.socket.write('ok');
    await waitFor('the echo on a new connection', () => d.received() === 'ok');
    proxy.heal();
    d.socket.write('!');
    await waitFor('the echo after heal', () => d.received() === 'ok!');
    await expect(
      waitFor('any echo on the stranded connection', () => c.received() !== 'a', { timeoutMs: 500 }),
    ).rejects.toThrow('timed out');
    expect(c.ended()).toBeUndefined();
    expect(proxy.strandedOpen).toBe(1);
    // The client giving up on it is seen; the proxy still keeps the upstream side.
    c.socket.destroy();
    await waitFor('the client side to close', () => proxy.strandedOpen === 0);
  });

  it('reset sends an RST on open connections and lets new ones through', async () => {
    const c = await open();
    proxy.reset();
    await waitFor('the reset', () => c.ended());
    expect(c.ended()).toBe('ECONNRESET');
    const d = await open();
    d.socket.write('ok');
    await waitFor('the echo', () => d.received() === 'ok');
  });

  it('listens on a fixed port when asked', async () => {
    // A port free a moment ago (the system's pick), not a guess: beside the other lanes, proxy.port + 1 was taken.
    const port = await freePort();
    const fixed = new FaultProxy('127.0.0.1', echo.port, { listenPort: port });
    try {
      expect(await fixed.start()).toBe(`127.0.0.1:${port}`);
    } finally {
      await fixed.stop();
    }
  });

  it('keeps the TcpProxy API of the existing tests (start, cut, heal, stop)', async () => {
    const tcp = new TcpProxy('127.0.0.1', echo.port);
    const address = await tcp.start();
    try {
      const c = await client(address);
      sockets.push(c.socket);
      tcp.cut();
      await waitFor('dropped', () => c.ended());
      tcp.heal();
      const d = await client(address);
      sockets.push(d.socket);
      d.socket.write('z');
      await waitFor('the echo', () => d.received() === 'z');
    } finally {
      await tcp.stop();
    }
  });
});

/** A loopback port the system just handed out and released. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

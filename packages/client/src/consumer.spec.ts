import { StreamConsumer } from './consumer';
import type { ConsumeOptions, Handler, Transport } from './consumer-types';
import { MemoryDedupeStore } from './dedupe/memory-dedupe-store';
import { NotFoundError, RejectError } from './errors';
import { HttpClient } from './http';
import { fakeConnects, FakeConnection } from './testing/fake-connection';
import type { Connect } from './transports/connection';
import { TransportRefusedError } from './transports/connection';

const http = new HttpClient({ url: 'http://mesh' });
const until = async (what: string, probe: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !probe(); i++) await new Promise((r) => setTimeout(r, 2));
  if (!probe()) throw new Error(`never: ${what}`);
};
const start = (
  handler: Handler | undefined,
  options: ConsumeOptions = {},
  refuse?: (t: Transport) => Error | undefined,
) => {
  const { connections, connect } = fakeConnects(refuse);
  const consumer = new StreamConsumer(
    http,
    'sub',
    handler,
    { reconnect: { initialDelayMs: 1, maxDelayMs: 2 }, ackDeadlineMs: false, ...options },
    connect,
  );
  return {
    consumer,
    connections,
    conn: async (n = 0): Promise<FakeConnection> => (
      await until(`connection ${n}`, () => connections.length > n),
      connections[n]
    ),
  };
};
const gate = () => {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
};

describe('stream consumer', () => {
  it("handles deliveries a transport hands over before its connect returned (a long-poll's first poll)", async () => {
    const handled: string[] = [];
    let connection: FakeConnection | undefined;
    const early: Connect = async (p) => {
      connection = new FakeConnection('long-poll', p);
      connection.deliver('d1', { id: 'e1' });
      connection.deliver('d2', { id: 'e2' });
      return connection;
    };
    const consumer = new StreamConsumer(
      http,
      'sub',
      (e) => void handled.push(e.id),
      { transport: 'long-poll', ackDeadlineMs: false },
      { websocket: early, sse: early, 'long-poll': early },
    );
    await until('both acked', () => connection?.answers.length === 2);
    expect(handled).toEqual(['e1', 'e2']);
    expect(consumer.state).toBe('connected');
    await consumer.close();
  });

  it('a dedupe store that fails: a failed seen nacks the delivery, a failed record after success still acks, drain resolves', async () => {
    const failing = new MemoryDedupeStore();
    let seenFails = 1;
    let recordFails = 1;
    const seen = failing.seen.bind(failing);
    const record = failing.record.bind(failing);
    failing.seen = async (source, id) => {
      if (seenFails-- > 0) throw new Error('store down (seen)');
      return seen(source, id);
    };
    failing.record = async (source, id) => {
      if (recordFails-- > 0) throw new Error('store down (record)');
      return record(source, id);
    };
    const handled: string[] = [];
    const errors: string[] = [];
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      const { consumer, conn } = start((e) => void handled.push(e.id), { dedupe: failing, nackDelayMs: 5 });
      consumer.on('error', (e) => errors.push(e.message));
      const c = await conn();
      c.deliver('d1', { id: 'e1' });
      await until('nacked', () => c.answers.length === 1);
      c.deliver('d2', { id: 'e1' });
      await until('acked', () => c.answers.length === 2);
      expect(c.answers).toEqual([
        { deliveryId: 'd1', action: 'nack', delayMs: 5 },
        { deliveryId: 'd2', action: 'ack' },
      ]);
      expect(handled).toEqual(['e1']);
      expect(errors).toEqual(['store down (seen)', 'store down (record)']);
      expect(consumer.stats).toMatchObject({ errors: 2, handled: 1, acked: 1, nacked: 1 });
      await consumer.drain();
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('a batch whose dedupe lookup fails is nacked whole, and handled when it comes again', async () => {
    const failing = new MemoryDedupeStore();
    let seenFails = 1;
    const seen = failing.seen.bind(failing);
    failing.seen = async (source, id) => {
      if (seenFails-- > 0) throw new Error('store down');
      return seen(source, id);
    };
    const batches: string[][] = [];
    const { connections, connect } = fakeConnects();
    const consumer = new StreamConsumer(
      http,
      'sub',
      { batch: (items) => void batches.push(items.map((i) => i.event.id)) },
      { dedupe: failing, nackDelayMs: 5, ackDeadlineMs: false },
      connect,
    );
    await until('connected', () => connections.length === 1);
    const c = connections[0];
    c.deliver('d1', { id: 'e1' });
    c.deliver('d2', { id: 'e2' });
    await until('both nacked', () => c.answers.length === 2);
    expect(c.answers.map((a) => a.action)).toEqual(['nack', 'nack']);
    c.deliver('d3', { id: 'e1' });
    c.deliver('d4', { id: 'e2' });
    await until('both acked', () => c.answers.length === 4);
    expect(batches).toEqual([['e1', 'e2']]);
    expect(consumer.stats.errors).toBe(1);
    await consumer.close();
  });

  it('refuses options that would stall it or that the runtime refuses, naming the option', () => {
    for (const [options, named] of [
      [{ window: 0 }, 'window'],
      [{ window: 1001 }, 'window'],
      [{ concurrency: 0 }, 'concurrency'],
      [{ concurrency: NaN }, 'concurrency'],
      [{ nackDelayMs: 7_200_000 }, 'nackDelayMs'],
      [{ nackDelayMs: -1 }, 'nackDelayMs'],
      [{ ackDeadlineMs: 0 }, 'ackDeadlineMs'],
      [{ reconnect: { initialDelayMs: 0 } }, 'reconnect.initialDelayMs'],
      [{ reconnect: { initialDelayMs: 500, maxDelayMs: 100 } }, 'reconnect.maxDelayMs'],
    ] as [ConsumeOptions, string][])
      expect(() => new StreamConsumer(http, 'sub', () => undefined, options, fakeConnects().connect)).toThrow(
        new RegExp(`^${named.replace('.', '\\.')} (must|\\()`),
      );
  });

  it('holds no backoff timer once closed, so the process can exit', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    const consumer = new StreamConsumer(
      http,
      'sub',
      () => undefined,
      { reconnect: { initialDelayMs: 60_000, maxDelayMs: 60_000 }, ackDeadlineMs: false },
      fakeConnects(() => new Error('connection refused')).connect,
    );
    await until('waiting to connect again', () => timers() > before);
    await consumer.close();
    expect(timers()).toBe(before);
  });

  it('acks only after the handler resolved', async () => {
    const g = gate();
    const { consumer, conn } = start(() => g.opened);
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    await new Promise((r) => setTimeout(r, 20));
    expect(c.answers).toEqual([]);
    g.open();
    await until('acked', () => c.answers.length === 1);
    expect(c.answers).toEqual([{ deliveryId: 'd1', action: 'ack' }]);
    expect(consumer.stats).toMatchObject({ handled: 1, acked: 1 });
    await consumer.close();
  });

  it('extends the delivery every third of the ack deadline while the handler runs, and stops when it ended', async () => {
    const g = gate();
    const { consumer, conn } = start(() => g.opened, { ackDeadlineMs: 30 });
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    await until('three extensions', () => c.answers.length >= 3);
    g.open();
    await until('acked', () => c.answers.some((a) => a.action === 'ack'));
    const settled = c.answers.length;
    await new Promise((r) => setTimeout(r, 60));
    expect(c.answers.slice(0, 3)).toEqual(
      Array.from({ length: 3 }, () => ({ deliveryId: 'd1', action: 'extend', deadlineMs: 30 })),
    );
    expect(c.answers.at(-1)).toEqual({ deliveryId: 'd1', action: 'ack' });
    expect(c.answers).toHaveLength(settled);
    await consumer.close();
  });

  it('nacks (with nackDelayMs) when the handler throws, and rejects on RejectError', async () => {
    const { consumer, conn } = start(
      async (e) => {
        if (e.id === 'bad') throw new RejectError('poison');
        throw new Error('flaky');
      },
      { nackDelayMs: 250 },
    );
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    c.deliver('d2', { id: 'bad' });
    await until('answered', () => c.answers.length === 2);
    expect(c.answers).toEqual(
      expect.arrayContaining([
        { deliveryId: 'd1', action: 'nack', delayMs: 250 },
        { deliveryId: 'd2', action: 'reject', reason: 'poison' },
      ]),
    );
    expect(consumer.stats).toMatchObject({ handled: 0, acked: 0, nacked: 1, rejected: 1 });
    await consumer.close();
  });

  it('hands a redelivery of an event whose handler failed to the handler again (recorded only after success)', async () => {
    let calls = 0;
    const { consumer, conn } = start(async () => {
      if (++calls === 1) throw new Error('first attempt fails');
    });
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    await until('nacked', () => c.answers.length === 1);
    c.deliver('d2', { id: 'e1' });
    await until('answered again', () => c.answers.length === 2);
    expect(calls).toBe(2);
    expect(c.answers[1]).toEqual({ deliveryId: 'd2', action: 'ack' });
    expect(consumer.stats).toMatchObject({ handled: 1, duplicates: 0 });
    await consumer.close();
  });

  it('acks a redelivery of a handled event without calling the handler, and counts it', async () => {
    const seen: string[] = [];
    const { consumer, conn } = start(async (e) => void seen.push(e.id));
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    await until('acked', () => c.answers.length === 1);
    c.deliver('d2', { id: 'e1' });
    c.deliver('d3', { id: 'e1', source: '/other' });
    await until('answered', () => c.answers.length === 3);
    expect(seen).toEqual(['e1', 'e1']);
    expect(consumer.stats).toMatchObject({ handled: 2, duplicates: 1, acked: 3 });
    await consumer.close();
  });

  it("holds a redelivery that comes while the same event's handler runs, then acks it as a duplicate", async () => {
    const g = gate();
    let calls = 0;
    const { consumer, conn } = start(async () => {
      calls++;
      await g.opened;
    });
    const first = await conn();
    first.deliver('d1', { id: 'e1' });
    await until('running', () => calls === 1);
    first.drop();
    const second = await conn(1);
    second.deliver('d2', { id: 'e1' });
    await new Promise((r) => setTimeout(r, 20));
    expect(calls).toBe(1);
    g.open();
    await until('the redelivery acked', () => second.answers.length === 1);
    expect(second.answers).toEqual([{ deliveryId: 'd2', action: 'ack' }]);
    expect(first.answers).toEqual([]);
    expect(consumer.stats).toMatchObject({ handled: 1, duplicates: 1, acked: 1, reconnects: 1 });
    await consumer.close();
  });

  it('backs off more each time a runtime accepts and drops at once, instead of reconnecting every few milliseconds', async () => {
    let connects = 0;
    const dropping: Connect = async (p) => {
      connects++;
      const c = new FakeConnection('websocket', p);
      setImmediate(() => c.drop());
      return c;
    };
    const consumer = new StreamConsumer(
      http,
      'sub',
      () => undefined,
      { transport: 'websocket', reconnect: { initialDelayMs: 10, maxDelayMs: 1000 }, ackDeadlineMs: false },
      { websocket: dropping, sse: dropping, 'long-poll': dropping },
    );
    await new Promise((r) => setTimeout(r, 400));
    await consumer.close();
    // Starting again at 10 ms each time, about 80 connects in 400 ms; growing (10, 20, 40, ... ms, jittered), under 20.
    expect(connects).toBeGreaterThan(2);
    expect(connects).toBeLessThan(20);
  });

  it('reconnects after a drop, with state events', async () => {
    const states: string[] = [];
    const { consumer, conn } = start(async () => undefined);
    consumer.on('state', (s) => states.push(s.state));
    (await conn()).drop();
    (await conn(1)).drop();
    const third = await conn(2);
    third.deliver('d1', { id: 'e1' });
    await until('acked on the third connection', () => third.answers.length === 1);
    expect(consumer.stats.reconnects).toBe(2);
    await consumer.close();
    expect(states).toEqual(['connected', 'reconnecting', 'connected', 'reconnecting', 'connected', 'closed']);
  });

  it('falls back WebSocket -> SSE -> long-poll on refused transports, and stops on a fatal refusal', async () => {
    const refused = new TransportRefusedError('UPGRADE_REFUSED', 'no');
    const a = start(
      async () => undefined,
      {},
      (t) => (t === 'long-poll' ? undefined : refused),
    );
    expect((await a.conn()).transport).toBe('long-poll');
    expect(a.consumer.transport).toBe('long-poll');
    await a.consumer.close();
    const states: { state: string; error?: Error }[] = [];
    const b = start(
      async () => undefined,
      {},
      () => new NotFoundError('SUBSCRIPTION_NOT_FOUND', 'gone', 404),
    );
    b.consumer.on('state', (s) => states.push(s));
    await until('closed', () => b.consumer.state === 'closed');
    expect(states.at(-1)?.error).toBeInstanceOf(NotFoundError);
  });

  it('drain: takes nothing new, waits for running handlers and their acks, then closes', async () => {
    const g = gate();
    const seen: string[] = [];
    const { consumer, conn } = start(async (e) => {
      seen.push(e.id);
      await g.opened;
    });
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    await until('running', () => seen.length === 1);
    const drained = consumer.drain();
    c.deliver('d2', { id: 'e2' });
    g.open();
    await drained;
    expect(seen).toEqual(['e1']);
    expect(c.answers).toEqual([{ deliveryId: 'd1', action: 'ack' }]);
    expect(consumer.state).toBe('closed');
  });

  it('as an async iterator: yields deliveries the caller answers; an ack records the event', async () => {
    const { consumer, conn } = start(undefined);
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    c.deliver('d2', { id: 'e2' });
    const got: string[] = [];
    for await (const d of consumer) {
      got.push(d.event.id);
      if (d.event.id === 'e1') await d.ack();
      else await d.nack(5);
      if (got.length === 2) break;
    }
    c.deliver('d3', { id: 'e1' });
    await until('the duplicate acked', () => c.answers.length === 3);
    expect(c.answers).toEqual([
      { deliveryId: 'd1', action: 'ack' },
      { deliveryId: 'd2', action: 'nack', delayMs: 5 },
      { deliveryId: 'd3', action: 'ack' },
    ]);
    expect(consumer.stats.duplicates).toBe(1);
    await consumer.close();
  });
});

describe('MemoryDedupeStore', () => {
  it('forgets the oldest past maxEntries and any older than maxAgeMs', async () => {
    let now = 0;
    const store = new MemoryDedupeStore({ maxEntries: 2, maxAgeMs: 100 }, () => now);
    await store.record('/s', 'a');
    await store.record('/s', 'b');
    await store.record('/s', 'c');
    expect([await store.seen('/s', 'a'), await store.seen('/s', 'b'), await store.seen('/s', 'c')]).toEqual([
      false,
      true,
      true,
    ]);
    now = 150;
    await store.record('/s', 'd');
    expect([await store.seen('/s', 'b'), await store.seen('/s', 'd'), store.size]).toEqual([false, true, 1]);
  });

  it('keys by (source, id): the same id from another source is another event', async () => {
    const store = new MemoryDedupeStore();
    await store.record('/a', 'x');
    expect(await store.seen('/b', 'x')).toBe(false);
    expect(await store.seen('/a', 'x')).toBe(true);
  });
});

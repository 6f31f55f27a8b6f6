import { EventMeshClient } from './client';
import { StreamConsumer } from './consumer';
import type { BatchHandler, BatchItem, ConsumeOptions } from './consumer-types';
import { RejectError } from './errors';
import { HttpClient } from './http';
import { fakeConnects, type FakeConnection } from './testing/fake-connection';

const http = new HttpClient({ url: 'http://mesh' });
const until = async (what: string, probe: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !probe(); i++) await new Promise((r) => setTimeout(r, 2));
  if (!probe()) throw new Error(`never: ${what}`);
};
const start = (handler: BatchHandler, options: ConsumeOptions & { maxBatchEvents?: number } = {}) => {
  const { connections, connect } = fakeConnects();
  const { maxBatchEvents, ...rest } = options;
  const consumer = new StreamConsumer(
    http,
    'sub',
    { batch: handler, maxBatchEvents },
    { reconnect: { initialDelayMs: 1, maxDelayMs: 2 }, ackDeadlineMs: false, ...rest },
    connect,
  );
  const conn = async (): Promise<FakeConnection> => (
    await until('connected', () => connections.length > 0),
    connections[0]
  );
  return { consumer, conn };
};
const gate = () => {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
};
const ids = (batch: BatchItem[]) => batch.map((b) => b.event.id);
/** A consumer whose handler records each batch's event ids and holds the first batch until `g.open()`. */
const startHoldingFirst = (maxBatchEvents: number) => {
  const batches: string[][] = [];
  const g = gate();
  const started = start(
    async (batch) => {
      batches.push(ids(batch));
      if (batches.length === 1) await g.opened;
    },
    { maxBatchEvents },
  );
  return { ...started, batches, g };
};

describe('stream consumer with a batch handler (consumeBatches)', () => {
  it("hands a turn's deliveries over as one batch, one batch at a time (what arrives meanwhile is the next), bounded by maxBatchEvents, and acks after the handler resolved", async () => {
    const { consumer, conn, batches, g } = startHoldingFirst(3);
    const c = await conn();
    for (const n of [1, 2]) c.deliver(`d${n}`, { id: `e${n}` });
    await until('first batch', () => batches.length === 1);
    for (const n of [3, 4, 5, 6, 7]) c.deliver(`d${n}`, { id: `e${n}` });
    await new Promise((r) => setTimeout(r, 20));
    // The first batch runs: nothing answered, no second batch started.
    expect(batches).toEqual([['e1', 'e2']]);
    expect(c.answers).toEqual([]);
    g.open();
    await until('all acked', () => c.answers.length === 7);
    expect(batches).toEqual([
      ['e1', 'e2'],
      ['e3', 'e4', 'e5'],
      ['e6', 'e7'],
    ]);
    expect(c.answers.every((a) => a.action === 'ack')).toBe(true);
    expect(consumer.stats).toMatchObject({ handled: 7, acked: 7 });
    await consumer.close();
  });

  it('answers each event as the list says; a throw nacks every event, a RejectError rejects every event, and a list of another length counts as a throw', async () => {
    const answers: ((batch: BatchItem[]) => unknown)[] = [
      () => ['ack', { nack: true }, { nack: true, delayMs: 5 }, { reject: 'poison' }],
      () => {
        throw new Error('target down');
      },
      () => {
        throw new RejectError('not for us');
      },
      () => ['ack'],
    ];
    const { consumer, conn } = start(async (batch) => answers.shift()!(batch) as never, { nackDelayMs: 250 });
    const c = await conn();
    const turn = async (from: number, count: number) => {
      const before = c.answers.length;
      for (let n = from; n < from + count; n++) c.deliver(`d${n}`, { id: `e${n}` });
      await until(`turn from ${from} answered`, () => c.answers.length === before + count);
      return c.answers.slice(before);
    };
    expect(await turn(1, 4)).toEqual([
      { deliveryId: 'd1', action: 'ack' },
      { deliveryId: 'd2', action: 'nack', delayMs: 250 },
      { deliveryId: 'd3', action: 'nack', delayMs: 5 },
      { deliveryId: 'd4', action: 'reject', reason: 'poison' },
    ]);
    expect(await turn(5, 2)).toEqual([
      { deliveryId: 'd5', action: 'nack', delayMs: 250 },
      { deliveryId: 'd6', action: 'nack', delayMs: 250 },
    ]);
    expect(await turn(7, 2)).toEqual([
      { deliveryId: 'd7', action: 'reject', reason: 'not for us' },
      { deliveryId: 'd8', action: 'reject', reason: 'not for us' },
    ]);
    // One outcome for two events: the handler's error, both nacked (not the first acked).
    expect(await turn(9, 2)).toEqual([
      { deliveryId: 'd9', action: 'nack', delayMs: 250 },
      { deliveryId: 'd10', action: 'nack', delayMs: 250 },
    ]);
    expect(consumer.stats).toMatchObject({ handled: 1, acked: 1, nacked: 6, rejected: 3 });
    await consumer.close();
  });

  it('acks a redelivery of a handled event without handing it over; the same event twice in one batch is handed over once and both deliveries answered', async () => {
    const batches: string[][] = [];
    const { consumer, conn } = start(async (batch) => void batches.push(ids(batch)));
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    c.deliver('d2', { id: 'e2' });
    c.deliver('d3', { id: 'e1' });
    await until('three answered', () => c.answers.length === 3);
    c.deliver('d4', { id: 'e2' });
    c.deliver('d5', { id: 'e3' });
    await until('five answered', () => c.answers.length === 5);
    expect(batches).toEqual([['e1', 'e2'], ['e3']]);
    expect(c.answers.map((a) => `${a.deliveryId}:${a.action}`).sort()).toEqual([
      'd1:ack',
      'd2:ack',
      'd3:ack',
      'd4:ack',
      'd5:ack',
    ]);
    expect(consumer.stats).toMatchObject({ handled: 3, duplicates: 2, acked: 5 });
    await consumer.close();
  });

  it('extends every delivery of a running batch every third of the deadline, and stops when it ended', async () => {
    const g = gate();
    const { consumer, conn } = start(() => g.opened, { ackDeadlineMs: 30 });
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    c.deliver('d2', { id: 'e2' });
    await until('two rounds of extensions', () => c.answers.length >= 4);
    g.open();
    await until('acked', () => c.answers.filter((a) => a.action === 'ack').length === 2);
    const settled = c.answers.length;
    await new Promise((r) => setTimeout(r, 60));
    expect(c.answers.slice(0, 4)).toEqual([
      { deliveryId: 'd1', action: 'extend', deadlineMs: 30 },
      { deliveryId: 'd2', action: 'extend', deadlineMs: 30 },
      { deliveryId: 'd1', action: 'extend', deadlineMs: 30 },
      { deliveryId: 'd2', action: 'extend', deadlineMs: 30 },
    ]);
    expect(c.answers).toHaveLength(settled);
    await consumer.close();
  });

  it('drain: waits for the running batch and its answers, starts none of what waits, then closes', async () => {
    const g = gate();
    const batches: string[][] = [];
    const { consumer, conn } = start(async (batch) => {
      batches.push(ids(batch));
      await g.opened;
    });
    const c = await conn();
    c.deliver('d1', { id: 'e1' });
    await until('running', () => batches.length === 1);
    c.deliver('d2', { id: 'e2' });
    const drained = consumer.drain();
    c.deliver('d3', { id: 'e3' });
    g.open();
    await drained;
    expect(batches).toEqual([['e1']]);
    expect(c.answers).toEqual([{ deliveryId: 'd1', action: 'ack' }]);
    expect(consumer.state).toBe('closed');
  });

  it("keeps a batched subscription's batch whole in one handler batch, past maxBatchEvents (its parts are answered together)", async () => {
    const { consumer, conn, batches, g } = startHoldingFirst(2);
    const c = await conn();
    c.deliver('x', { id: 'e0' });
    await until('first batch', () => batches.length === 1);
    // A runtime batch of five arrives while the first runs, then a single delivery.
    for (let i = 0; i < 5; i++) c.deliver(`b1#${i}`, { id: `p${i}` });
    c.deliver('y', { id: 'e1' });
    g.open();
    await until('all answered', () => c.answers.length === 7);
    expect(batches).toEqual([['e0'], ['p0', 'p1', 'p2', 'p3', 'p4'], ['e1']]);
    await consumer.drain();
  });

  it('refuses a maxBatchEvents that is not a positive integer, naming it', () => {
    const client = new EventMeshClient({ url: 'http://mesh' });
    for (const bad of [0, -1, 1.5, Number.NaN])
      expect(() => client.consumeBatches('sub', () => undefined, { maxBatchEvents: bad })).toThrow(
        /^maxBatchEvents must be a positive integer/,
      );
  });
});

import type { EventFrame } from '@libs/frame';
import { StreamDelivery, StreamHub, StreamMember } from './stream-hub';

/** A delivery's ack deadline, extended by its client while a long handler runs (fake clock). */
describe('StreamHub: extending a delivery', () => {
  const frame: EventFrame = {
    id: 'e1',
    source: '/t',
    type: 't.one',
    extensions: {},
    data: Buffer.from('{}'),
  };
  const target = { id: 's1', config: { policy: 'LOAD_BALANCE', ackTimeoutMs: 1000 } };
  let hub: StreamHub;
  let received: StreamDelivery[];
  const member = (): StreamMember => ({ id: 'ws:1', subscriptionId: 's1', window: 10, push: (d) => received.push(d) });

  beforeEach(() => {
    jest.useFakeTimers();
    hub = new StreamHub(0);
    received = [];
  });
  afterEach(() => jest.useRealTimers());

  it('keeps a delivery whose client extends it before each deadline, for as long as it does; its ack then settles it', async () => {
    hub.connect(member());
    const extended: number[] = [];
    const outcome = hub.deliver(target, frame, undefined, { onExtend: (ms) => extended.push(ms) });
    await jest.advanceTimersByTimeAsync(0);
    const [{ deliveryId }] = received;
    // Five extensions of 1 s, each 900 ms after the last: 4.5 s held, past four ack timeouts.
    for (let i = 0; i < 5; i++) {
      await jest.advanceTimersByTimeAsync(900);
      expect(hub.act('s1', deliveryId, { kind: 'extend', deadlineMs: 1000 })).toBe(true);
    }
    await jest.advanceTimersByTimeAsync(900);
    expect(hub.act('s1', deliveryId, { kind: 'ack' })).toBe(true);
    await expect(outcome).resolves.toEqual({ kind: 'ack' });
    expect(extended).toEqual([1000, 1000, 1000, 1000, 1000]);
    expect(received).toHaveLength(1);
  });

  it('times the delivery out at the extended deadline when no answer comes; an extension after that is refused', async () => {
    hub.connect(member());
    const outcome = hub.deliver(target, frame);
    await jest.advanceTimersByTimeAsync(0);
    const [{ deliveryId }] = received;
    expect(hub.act('s1', deliveryId, { kind: 'extend', deadlineMs: 5000 })).toBe(true);
    await jest.advanceTimersByTimeAsync(4999);
    expect(hub.subscriptionOf(deliveryId)).toBe('s1');
    await jest.advanceTimersByTimeAsync(1);
    await expect(outcome).resolves.toEqual({ kind: 'timeout' });
    expect(hub.act('s1', deliveryId, { kind: 'extend', deadlineMs: 5000 })).toBe(false);
  });

  it("refuses an extension for another subscription's delivery", async () => {
    hub.connect(member());
    void hub.deliver(target, frame);
    await jest.advanceTimersByTimeAsync(0);
    expect(hub.act('s2', received[0].deliveryId, { kind: 'extend', deadlineMs: 5000 })).toBe(false);
  });
});

/** A batched subscription's batch (`deliverBatch`): one delivery to a client that takes batches, else event by event. */
describe('StreamHub: batches', () => {
  const frameOf = (id: string): EventFrame => ({ id, source: '/t', type: 't.one', extensions: {} });
  const batch = { frames: ['e1', 'e2', 'e3'].map(frameOf), entries: ['e1', 'e2', 'e3'].map((id) => Buffer.from(id)) };
  const target = { id: 's1', config: { ackTimeoutMs: 60_000 } };

  function member(id: string, window: number, batches: boolean) {
    const singles: StreamDelivery[] = [];
    const whole: { deliveryId: string; entries: Buffer[] }[] = [];
    const m: StreamMember = {
      id,
      subscriptionId: 's1',
      window,
      push: (d) => singles.push(d),
      ...(batches ? { pushBatch: (d: { deliveryId: string; entries: Buffer[] }) => whole.push(d) } : {}),
    };
    return { m, singles, whole };
  }

  it('hands a batch to a client that takes batches as one delivery (one place in its window), one answer settling it', async () => {
    const hub = new StreamHub(4);
    const c = member('ws:1', 1, true);
    hub.connect(c.m);
    const outcome = hub.deliverBatch(target, batch);
    expect(c.whole).toHaveLength(1);
    expect(c.whole[0].entries.map(String)).toEqual(['e1', 'e2', 'e3']);
    expect(c.whole[0].deliveryId).toMatch(/^4\./);
    expect(c.singles).toHaveLength(0);
    expect(hub.load('s1').held).toBe(1);
    // Its window (1) is full: the next batch is not handed to it now.
    expect(hub.deliverNow(target, batch)).toBeUndefined();
    expect(hub.act('s1', c.whole[0].deliveryId, { kind: 'reject', reason: 'e2 refused' })).toBe(true);
    await expect(outcome).resolves.toEqual({ kind: 'reject', reason: 'e2 refused' });
    expect(hub.load('s1').held).toBe(0);
    // Answered once: a second answer for the batch is stale.
    expect(hub.act('s1', c.whole[0].deliveryId, { kind: 'ack' })).toBe(false);
  });

  it("waits for room in a batch-taking client's window, as one batch (not event by event)", async () => {
    const hub = new StreamHub(0);
    const c = member('ws:1', 1, true);
    hub.connect(c.m);
    const first = hub.deliverBatch(target, batch);
    const second = hub.deliverBatch(target, batch);
    await new Promise((r) => setImmediate(r));
    expect(c.whole).toHaveLength(1);
    expect(c.singles).toHaveLength(0);
    hub.act('s1', c.whole[0].deliveryId, { kind: 'ack' });
    await expect(first).resolves.toEqual({ kind: 'ack' });
    await new Promise((r) => setImmediate(r));
    expect(c.whole).toHaveLength(2);
    expect(c.singles).toHaveLength(0);
    hub.act('s1', c.whole[1].deliveryId, { kind: 'ack' });
    await expect(second).resolves.toEqual({ kind: 'ack' });
  });

  it('gives a batch event by event to a client that takes events when the batch takers are full, rather than waiting', async () => {
    const hub = new StreamHub(0);
    const ws = member('ws:1', 1, true);
    const sse = member('sse:1', 10, false);
    hub.connect(ws.m);
    hub.connect(sse.m);
    void hub.deliverBatch(target, batch);
    expect(ws.whole).toHaveLength(1);
    const second = hub.deliverBatch(target, batch);
    await new Promise((r) => setImmediate(r));
    // The batch taker's window is full: the SSE client with room takes the events (round robin may give the
    // batch taker none while it is full).
    expect(sse.singles.length).toBe(3);
    for (const d of sse.singles) hub.act('s1', d.deliveryId, { kind: 'ack' });
    await expect(second).resolves.toEqual({ kind: 'ack' });
    hub.disconnect(ws.m);
    hub.disconnect(sse.m);
  });

  it('delivers a batch event by event to a client that does not take batches, acked only when every event is', async () => {
    const hub = new StreamHub(0);
    const c = member('sse:1', 10, false);
    hub.connect(c.m);
    const outcome = hub.deliverBatch(target, batch);
    await new Promise((r) => setImmediate(r));
    expect(c.singles.map((d) => d.frame.id)).toEqual(['e1', 'e2', 'e3']);
    let settled = false;
    void outcome.then(() => (settled = true));
    hub.act('s1', c.singles[0].deliveryId, { kind: 'ack' });
    hub.act('s1', c.singles[2].deliveryId, { kind: 'ack' });
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    hub.act('s1', c.singles[1].deliveryId, { kind: 'nack', delayMs: 50 });
    await expect(outcome).resolves.toEqual({ kind: 'nack', delayMs: 50 });
  });

  it('picks a client that takes batches over one that does not; BROADCAST goes event by event to every client', async () => {
    const hub = new StreamHub(0);
    const sse = member('sse:1', 10, false);
    const ws = member('ws:1', 10, true);
    hub.connect(sse.m);
    hub.connect(ws.m);
    void hub.deliverBatch(target, batch);
    expect(ws.whole).toHaveLength(1);
    expect(sse.singles).toHaveLength(0);
    void hub.deliverBatch({ id: 's1', config: { policy: 'BROADCAST' } }, batch);
    await new Promise((r) => setImmediate(r));
    expect(ws.whole).toHaveLength(1);
    expect(ws.singles.map((d) => d.frame.id)).toEqual(['e1', 'e2', 'e3']);
    expect(sse.singles.map((d) => d.frame.id)).toEqual(['e1', 'e2', 'e3']);
    // Gone: what they held is settled (and their ack timers with it).
    hub.disconnect(ws.m);
    hub.disconnect(sse.m);
  });
});

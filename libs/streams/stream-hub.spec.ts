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

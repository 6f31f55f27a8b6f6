import { ErrorCode, EventMeshError } from '@libs/errors';
import type { EventFrame } from '@libs/frame';
import { PollConsumers } from './poll-consumers';
import { StreamHub } from './stream-hub';

describe('PollConsumers', () => {
  let hub: StreamHub;
  let polls: PollConsumers;
  const signal = new AbortController().signal;

  beforeEach(() => {
    hub = new StreamHub(0);
    polls = new PollConsumers(hub, 2);
  });
  afterEach(() => polls.close());

  it('holds at most the cap of consumer names per subscription; known names keep polling, other subscriptions are apart', async () => {
    await polls.poll('s1', 'a', 10, 10, 0, signal);
    await polls.poll('s1', 'b', 10, 10, 0, signal);
    const refused = await polls.poll('s1', 'c', 10, 10, 0, signal).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(EventMeshError);
    expect(refused).toMatchObject({
      code: ErrorCode.TooManyConsumers,
      details: { subscriptionId: 's1', maxConsumers: 2 },
    });
    expect(hub.connected('s1')).toBe(2);
    await expect(polls.poll('s1', 'a', 10, 10, 0, signal)).resolves.toEqual([]);
    await expect(polls.poll('s2', 'c', 10, 10, 0, signal)).resolves.toEqual([]);
    expect(polls.size).toBe(3);
  });

  it('frees a name once it has not polled for a minute', async () => {
    jest.useFakeTimers();
    try {
      await polls.poll('s1', 'a', 10, 10, 0, signal);
      await polls.poll('s1', 'b', 10, 10, 0, signal);
      await expect(polls.poll('s1', 'c', 10, 10, 0, signal)).rejects.toMatchObject({
        code: ErrorCode.TooManyConsumers,
      });
      jest.advanceTimersByTime(60000);
      expect(hub.connected('s1')).toBe(0);
      await expect(polls.poll('s1', 'c', 10, 10, 0, signal)).resolves.toEqual([]);
    } finally {
      jest.useRealTimers();
    }
  });

  describe('a consumer that fell silent', () => {
    const frame: EventFrame = {
      id: 'e1',
      source: '/t',
      type: 't.one',
      extensions: {},
      data: Buffer.from('{}'),
    };
    const target = { id: 's1', config: { policy: 'LOAD_BALANCE', ackTimeoutMs: 3000 } };
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it('is let go once a delivery queued for it passes the ack timeout with no poll since; the next delivery goes to one that polls', async () => {
      await polls.poll('s1', 'dead', 10, 10, 0, signal);
      const first = hub.deliver(target, frame);
      // The first delivery goes to the only member, which never polls again (a killed client).
      await jest.advanceTimersByTimeAsync(0);
      await polls.poll('s1', 'live', 10, 10, 0, signal);
      await jest.advanceTimersByTimeAsync(3000);
      await expect(first).resolves.toEqual({ kind: 'timeout' });
      // Let go at the timeout, not a minute later: its name is free and the hub holds only the live consumer.
      expect(hub.connected('s1')).toBe(1);
      expect(polls.size).toBe(1);
      const second = hub.deliver(target, frame);
      await jest.advanceTimersByTimeAsync(0);
      const taken = await polls.poll('s1', 'live', 10, 10, 0, signal);
      expect(taken).toHaveLength(1);
      expect(hub.answer(taken[0].deliveryId, { kind: 'ack' })).toBe(true);
      await expect(second).resolves.toEqual({ kind: 'ack' });
    });

    it('is kept while it polls, however long its queued deliveries wait: a poll since the delivery was queued says it is alive', async () => {
      await polls.poll('s1', 'slow', 10, 10, 0, signal);
      const first = hub.deliver(target, frame);
      const second = hub.deliver(target, frame);
      // It takes one delivery at a time and answers neither in time; it polled after both were queued.
      await jest.advanceTimersByTimeAsync(1000);
      const taken = await polls.poll('s1', 'slow', 10, 1, 0, signal);
      expect(taken).toHaveLength(1);
      await jest.advanceTimersByTimeAsync(2000);
      await expect(first).resolves.toEqual({ kind: 'timeout' });
      await expect(second).resolves.toEqual({ kind: 'timeout' });
      expect(hub.connected('s1')).toBe(1);
      expect(polls.size).toBe(1);
    });

    it('is kept when a poll took the delivery and the client answers it late', async () => {
      const waiting = polls.poll('s1', 'waiting', 10, 10, 10000, signal);
      const first = hub.deliver(target, frame);
      // The waiting poll takes the delivery at once; the client answers it late.
      await expect(waiting).resolves.toHaveLength(1);
      await jest.advanceTimersByTimeAsync(3000);
      await expect(first).resolves.toEqual({ kind: 'timeout' });
      expect(hub.connected('s1')).toBe(1);
    });
  });
});

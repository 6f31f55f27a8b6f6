import { ErrorCode, EventMeshError } from '../errors';
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
    expect(refused).toMatchObject({ code: ErrorCode.TooManyConsumers, details: { subscriptionId: 's1', maxConsumers: 2 } });
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
      await expect(polls.poll('s1', 'c', 10, 10, 0, signal)).rejects.toMatchObject({ code: ErrorCode.TooManyConsumers });
      jest.advanceTimersByTime(60000);
      expect(hub.connected('s1')).toBe(0);
      await expect(polls.poll('s1', 'c', 10, 10, 0, signal)).resolves.toEqual([]);
    } finally {
      jest.useRealTimers();
    }
  });
});

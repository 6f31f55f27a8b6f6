import { AgentStream } from './agent-stream';
import { ParkedStreams } from './parked-streams';

/** A stream whose reader can be canceled: `outer` is the cancel of the delivery reading it. */
const streamOf = (outer: AbortSignal) => {
  const live = new AgentStream(outer);
  async function* none(): AsyncGenerator<never, void, undefined> {
    await new Promise(() => undefined);
    yield* [];
  }
  return live.open(none());
};

describe('ParkedStreams', () => {
  afterEach(() => jest.useRealTimers());

  it("hands a stream to the next delivery of the task's turn, once; the cancel of the delivery that left it no longer closes it", () => {
    const parked = new ParkedStreams();
    const first = new AbortController();
    const live = streamOf(first.signal);
    parked.park('t1', 1, { live, snapshot: undefined });
    expect(parked.holds('t1', 1, live)).toBe(true);
    first.abort();
    expect(live.closed).toBe(false);
    expect(parked.take('t1', 2)).toBeUndefined();
    expect(parked.take('t1', 1)?.live).toBe(live);
    expect(parked.take('t1', 1)).toBeUndefined();
    // The taker's cancel closes it from then on.
    const second = new AbortController();
    live.adopt(second.signal);
    second.abort();
    expect(live.closed).toBe(true);
    expect(parked.stats()).toMatchObject({ held: 0, parked: 1, taken: 1, expired: 0 });
  });

  it('closes a stream nobody takes within its TTL, and every stream at shutdown', () => {
    jest.useFakeTimers();
    const shutdown = new AbortController();
    const parked = new ParkedStreams({ ttlMs: 1000, shutdown: shutdown.signal });
    const late = streamOf(new AbortController().signal);
    parked.park('t1', 1, { live: late, snapshot: undefined });
    jest.advanceTimersByTime(1001);
    expect(late.closed).toBe(true);
    expect(parked.take('t1', 1)).toBeUndefined();
    const held = streamOf(new AbortController().signal);
    parked.park('t2', 1, { live: held, snapshot: undefined });
    shutdown.abort();
    expect(held.closed).toBe(true);
    expect(parked.stats()).toMatchObject({ held: 0, parked: 2, expired: 1 });
    // Parked after the shutdown: closed at once.
    const after = streamOf(new AbortController().signal);
    parked.park('t3', 1, { live: after, snapshot: undefined });
    expect(after.closed).toBe(true);
  });

  it('keeps one stream per turn: a second one parked closes the first', () => {
    const parked = new ParkedStreams();
    const [a, b] = [streamOf(new AbortController().signal), streamOf(new AbortController().signal)];
    parked.park('t1', 1, { live: a, snapshot: undefined });
    parked.park('t1', 1, { live: b, snapshot: undefined });
    expect(a.closed).toBe(true);
    expect(parked.take('t1', 1)?.live).toBe(b);
  });
});

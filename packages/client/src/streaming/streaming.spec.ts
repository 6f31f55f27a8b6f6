import { getEventListeners } from 'node:events';
import { AgentServer } from './agent';
import type { SessionConnection } from './connection';
import { ChunkTooLargeError, SessionBusyError, SessionCancelledError, SessionClosedError } from './errors';
import { decodeFrame, encodeFrame, type Frame, type FrameKind } from './frame';
import { SessionPublisher, SessionSubscription, type SubscribeOptions } from './live';
import { StreamSession } from './session';

/** The sessions connection as the session and the agent see it: what they send is recorded, frames are handed in. */
class FakeConnection {
  readonly callers = new Map<string, { frame(f: Frame): void }>();
  readonly publishers = new Map<string, { frame(f: Frame): void }>();
  readonly served = new Map<string, { frame(f: Frame): void }>();
  readonly resumable = new Set<unknown>();
  readonly sent: Frame[] = [];
  ensure = () => Promise.resolve();
  send(raw: Buffer): boolean {
    this.sent.push(decodeFrame(raw)!);
    return true;
  }
  /** A frame from the runtime, to whoever reads its id. */
  deliver(
    kind: FrameKind,
    id: string,
    parts: { call?: number; n?: number; data?: Buffer; attributes?: Frame['attributes'] } = {},
  ) {
    const frame = decodeFrame(encodeFrame({ kind, id, ...parts }))!;
    (this.callers.get(id) ?? this.served.get(id.split(':')[0]) ?? this.served.get(id))?.frame(frame);
  }
  of(kind: FrameKind): Frame[] {
    return this.sent.filter((f) => f.kind === kind);
  }
}

const turn = () => new Promise((r) => setImmediate(r));

async function openSession(connection: FakeConnection, window = 1000): Promise<StreamSession> {
  const opening = StreamSession.open(connection as unknown as SessionConnection, 'agent');
  await Promise.resolve();
  const id = connection.of('open')[0].id;
  connection.deliver('opened', id, { n: window });
  return opening;
}

describe('a caller session (StreamSession)', () => {
  it('gives credit back for what the reader took, one frame per turn, at once when half the window is owed', async () => {
    const connection = new FakeConnection();
    const session = await openSession(connection, 1000);
    const call = session.call('go');
    expect(connection.of('request')).toEqual([expect.objectContaining({ id: session.id, call: 1 })]);
    for (let i = 0; i < 3; i++) connection.deliver('chunk', session.id, { call: 1, data: Buffer.alloc(100) });
    const it = call[Symbol.asyncIterator]();
    await it.next();
    await it.next();
    expect(connection.of('credit')).toEqual([]);
    await turn();
    expect(connection.of('credit').map((f) => f.n)).toEqual([200]);
    // Half the window owed: given back at once, not at the end of the turn.
    for (let i = 0; i < 5; i++) connection.deliver('chunk', session.id, { call: 1, data: Buffer.alloc(100) });
    for (let i = 0; i < 5; i++) await it.next();
    expect(connection.of('credit').map((f) => f.n)).toEqual([200, 500]);
    // The last one, left unread, owes nothing until it is read.
    await turn();
    expect(connection.of('credit').map((f) => f.n)).toEqual([200, 500]);
    await it.next();
    await turn();
    expect(connection.of('credit').map((f) => f.n)).toEqual([200, 500, 100]);
  });

  it('ends the iteration at the end frame, after what is queued, and takes one call at a time', async () => {
    const connection = new FakeConnection();
    const session = await openSession(connection);
    const call = session.call('go');
    expect(() => session.call('again')).toThrow(SessionBusyError);
    connection.deliver('chunk', session.id, { call: 1, data: Buffer.from('a') });
    connection.deliver('chunk', session.id, { call: 1, data: Buffer.from('b') });
    connection.deliver('end', session.id, { call: 1 });
    expect(await call.text()).toBe('ab');
    expect(session.call('next')).toBeDefined();
  });

  it('on a cancel, tells the runtime, gives back the credit of what it held unread, and fails the iteration', async () => {
    const connection = new FakeConnection();
    const session = await openSession(connection);
    const call = session.call('go');
    for (let i = 0; i < 4; i++) connection.deliver('chunk', session.id, { call: 1, data: Buffer.alloc(50) });
    call.cancel();
    expect(connection.of('cancel')).toEqual([expect.objectContaining({ call: 1 })]);
    await expect(call.forEach(() => undefined)).rejects.toBeInstanceOf(SessionCancelledError);
    // A chunk of the cancelled call still on the way: its credit goes straight back too.
    connection.deliver('chunk', session.id, { call: 1, data: Buffer.alloc(50) });
    await turn();
    expect(connection.of('credit').reduce((sum, f) => sum + f.n, 0)).toBe(250);
  });

  it('cancels the call when the reader leaves the loop', async () => {
    const connection = new FakeConnection();
    const session = await openSession(connection);
    const call = session.call('go');
    connection.deliver('chunk', session.id, { call: 1, data: Buffer.alloc(10) });
    connection.deliver('chunk', session.id, { call: 1, data: Buffer.alloc(10) });
    for await (const _chunk of call) break;
    expect(connection.of('cancel')).toHaveLength(1);
    await turn();
    expect(connection.of('credit').reduce((sum, f) => sum + f.n, 0)).toBe(20);
  });

  it("lets go of a call's abort signal once the call is over (a signal kept for many calls holds none of them)", async () => {
    const connection = new FakeConnection();
    const session = await openSession(connection);
    const { signal } = new AbortController();
    for (let n = 1; n <= 3; n++) {
      const call = session.call('go', { signal });
      connection.deliver('end', session.id, { call: n });
      await call.text();
    }
    const broken = session.call('go', { signal });
    connection.deliver('error', session.id, {
      call: 4,
      attributes: { code: 'AGENT_ERROR', status: 502, scope: 'call' },
    });
    await expect(broken.text()).rejects.toThrow();
    const left = session.call('go', { signal });
    connection.deliver('chunk', session.id, { call: 5, data: Buffer.from('a') });
    for await (const _chunk of left) break;
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });
});

describe('a session subscription (SessionSubscription)', () => {
  async function subscribed(
    connection: FakeConnection,
    options: SubscribeOptions = {},
    attributes: Frame['attributes'] = {},
  ): Promise<SessionSubscription> {
    const subscribing = SessionSubscription.subscribe(connection as unknown as SessionConnection, 'prices', options);
    await turn();
    connection.deliver('subscribed', 'prices', {
      call: 1,
      n: 0,
      attributes: { window: 1000, recovered: true, ...attributes },
    });
    return subscribing;
  }
  const lostConnection = () => new SessionClosedError('CONNECTION_LOST', 'the sessions connection closed (1006)');

  it("survives an application's onRecovery or onPresence that throws: subscribed, and the publications still come", async () => {
    const warned = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const connection = new FakeConnection();
      const subscription = await subscribed(connection, {
        since: { epoch: 1, offset: 0 },
        onRecovery: () => {
          throw new Error('onRecovery failed');
        },
        onPresence: () => {
          throw new Error('onPresence failed');
        },
      });
      expect(() =>
        connection.deliver('presence', 'prices', { attributes: { event: 'join', client: 'c2', principal: 'p' } }),
      ).not.toThrow();
      expect(subscription.subscribers()).toEqual([{ client: 'c2', principal: 'p' }]);
      connection.deliver('chunk', 'prices', { call: 1, n: 1, data: Buffer.from('a'), attributes: { publisher: 'x' } });
      const first = await subscription[Symbol.asyncIterator]().next();
      expect(first.value?.data.toString()).toBe('a');
      expect(warned).toHaveBeenCalledTimes(2);
    } finally {
      warned.mockRestore();
    }
  });

  it('gives up a subscription the runtime never answers: rejected, unsubscribed, and the name free again', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate'] });
    try {
      const connection = new FakeConnection();
      const subscribing = SessionSubscription.subscribe(connection as unknown as SessionConnection, 'prices');
      const outcome = subscribing.then(
        () => 'subscribed',
        (e: { code?: string }) => e.code,
      );
      await turn();
      jest.advanceTimersByTime(60_000);
      expect(await outcome).toBe('SUBSCRIBE_TIMEOUT');
      expect(connection.of('unsubscribe')).toEqual([expect.objectContaining({ id: 'prices' })]);
      expect(connection.callers.has('prices')).toBe(false);
    } finally {
      jest.useRealTimers();
    }
  });

  it('gives up a publisher the runtime never answers (rejected, closed) rather than waiting without end', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate'] });
    try {
      const connection = new FakeConnection();
      const opening = SessionPublisher.open(connection as unknown as SessionConnection, 'prices');
      const outcome = opening.then(
        () => 'opened',
        (e: { code?: string }) => e.code,
      );
      await turn();
      jest.advanceTimersByTime(60_000);
      expect(await Promise.race([outcome, turn().then(() => 'still waiting')])).toBe('OPEN_TIMEOUT');
      expect(connection.of('close')).toEqual([expect.objectContaining({ id: connection.of('publisher')[0].id })]);
      expect(connection.publishers.size).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  it('subscribes again after a connection lost again before the runtime answered its resubscription', async () => {
    const connection = new FakeConnection();
    const subscription = await subscribed(connection);
    const it = subscription[Symbol.asyncIterator]();
    const next = it.next();
    subscription.lost(lostConnection());
    subscription.reconnected();
    // Lost again while the subscribe is on its way: it must wait for the next connection, not end.
    subscription.lost(lostConnection());
    await turn();
    subscription.reconnected();
    expect(connection.of('subscribe')).toHaveLength(3);
    connection.deliver('subscribed', 'prices', { call: 1, n: 0, attributes: { window: 1000, recovered: true } });
    connection.deliver('chunk', 'prices', { call: 1, n: 1, data: Buffer.from('a'), attributes: { publisher: 'x' } });
    expect((await next).value?.data.toString()).toBe('a');
  });

  it('gives no credit to a new subscription for what came on the one before (read after the resubscription)', async () => {
    const connection = new FakeConnection();
    const subscription = await subscribed(connection);
    for (let n = 1; n <= 3; n++)
      connection.deliver('chunk', 'prices', { call: 1, n, data: Buffer.alloc(100), attributes: { publisher: 'x' } });
    subscription.lost(lostConnection());
    subscription.reconnected();
    connection.deliver('subscribed', 'prices', { call: 1, n: 3, attributes: { window: 1000, recovered: true } });
    connection.deliver('chunk', 'prices', { call: 1, n: 4, data: Buffer.alloc(100), attributes: { publisher: 'x' } });
    const it = subscription[Symbol.asyncIterator]();
    for (let i = 0; i < 4; i++) await it.next();
    await turn();
    // The new window has 100 bytes in flight (offset 4): only they are given back.
    expect(connection.of('credit').reduce((sum, f) => sum + f.n, 0)).toBe(100);
  });
});

describe('an agent replica (AgentServer)', () => {
  async function serving(connection: FakeConnection, handler: Parameters<typeof AgentServer.serve>[2]) {
    const server = AgentServer.serve(connection as unknown as SessionConnection, 'agent', handler);
    await Promise.resolve();
    connection.deliver('served', 'agent', { attributes: { replica: 'r1' } });
    return server;
  }

  it("waits in send for the reader's credit, and sends in order as credit comes back", async () => {
    const connection = new FakeConnection();
    const sent: number[] = [];
    await serving(connection, async (_request, { send }) => {
      for (let n = 0; n < 5; n++) {
        await send(Buffer.alloc(40, n));
        sent.push(n);
      }
    });
    connection.deliver('open', 'agent:s1', { n: 100, attributes: { maxChunk: 50 } });
    connection.deliver('request', 'agent:s1', { call: 1, data: Buffer.from('{}') });
    await turn();
    expect(sent).toEqual([0, 1]);
    connection.deliver('credit', 'agent:s1', { n: 40 });
    await turn();
    expect(sent).toEqual([0, 1, 2]);
    connection.deliver('credit', 'agent:s1', { n: 80 });
    await turn();
    expect(sent).toEqual([0, 1, 2, 3, 4]);
    expect(connection.of('chunk').map((f) => f.data[0])).toEqual([0, 1, 2, 3, 4]);
    expect(connection.of('end')).toEqual([expect.objectContaining({ id: 'agent:s1', call: 1 })]);
  });

  it('aborts the handler on a cancel: its pending send rejects, and no end is sent', async () => {
    const connection = new FakeConnection();
    let failure: unknown;
    await serving(connection, async (_request, { send }) => {
      try {
        for (;;) await send(Buffer.alloc(60));
      } catch (e) {
        failure = e;
      }
    });
    connection.deliver('open', 'agent:s1', { n: 100, attributes: { maxChunk: 64 } });
    connection.deliver('request', 'agent:s1', { call: 1 });
    await turn();
    connection.deliver('cancel', 'agent:s1', { call: 1 });
    await turn();
    expect(failure).toBeInstanceOf(SessionCancelledError);
    expect(connection.of('end')).toEqual([]);
    expect(connection.of('chunk')).toHaveLength(1);
  });

  it('refuses a chunk above the largest before sending it, and fails the call with the error', async () => {
    const connection = new FakeConnection();
    let failure: unknown;
    await serving(connection, async (_request, { send }) => {
      await send(Buffer.alloc(65)).catch((e: unknown) => (failure = e));
      throw failure;
    });
    connection.deliver('open', 'agent:s1', { n: 1000, attributes: { maxChunk: 64 } });
    connection.deliver('request', 'agent:s1', { call: 1 });
    await turn();
    expect(failure).toBeInstanceOf(ChunkTooLargeError);
    expect(connection.of('chunk')).toEqual([]);
    expect(connection.of('error')).toEqual([expect.objectContaining({ call: 1 })]);
  });

  it("keeps the session open on an error of one call (its caller's AGENT_ERROR, as a client calling itself hears it)", async () => {
    const connection = new FakeConnection();
    const calls: number[] = [];
    await serving(connection, (request) => {
      calls.push(request.call);
      if (request.call === 1) throw new Error('no');
    });
    connection.deliver('open', 'agent:s1', { n: 1000, attributes: { maxChunk: 64 } });
    connection.deliver('request', 'agent:s1', { call: 1 });
    await turn();
    connection.deliver('error', 'agent:s1', {
      call: 1,
      attributes: { code: 'AGENT_ERROR', status: 502, message: 'no', scope: 'call' },
    });
    connection.deliver('request', 'agent:s1', { call: 2 });
    await turn();
    expect(calls).toEqual([1, 2]);
    expect(connection.of('close')).toEqual([]);
    expect(connection.of('end')).toEqual([expect.objectContaining({ call: 2 })]);
  });
});

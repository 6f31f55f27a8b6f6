import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import type { EventFrame } from '@libs/frame';
import type { PresenceRow } from '@libs/storage';
import { CHANNEL_PATH, CLUSTER_TOKEN_HEADER, HOLDER_QUERY, serveChannel } from './cluster-channel';
import { ClusterCredential } from './cluster-credential';
import { ClusterStreamRouter } from './cluster-stream-router';
import { PeerChannels } from './peer-channels';
import type { PresenceReader } from './stream-presence';
import { StreamDelivery, StreamHub, StreamMember, StreamOutcome } from './stream-hub';

const KEY = { id: 'k1', key: Buffer.alloc(32, 7) };
const frame: EventFrame = {
  id: 'e1',
  source: '/t',
  type: 't.one',
  extensions: { tenantkey: 'x' },
  data: Buffer.from('{"n":1}'),
};
const SUB = '00000000-0000-4000-8000-000000000001';

/** A client of a hub: records what it is handed. */
const member = (id: string, window = 5, subscriptionId = SUB): StreamMember & { got: StreamDelivery[] } => {
  const got: StreamDelivery[] = [];
  return { id, subscriptionId, window, got, push: (d) => got.push(d) };
};

/**
 * A holder process: a hub and the holder's end of the channel on a loopback HTTP server, the handshake checked as
 * the gateway's route checks it (cluster-channel-route.ts).
 */
class Holder {
  readonly hub = new StreamHub(0);
  private readonly server: Server;
  private readonly wss = new WebSocketServer({ noServer: true });
  address = '';

  constructor(
    readonly holder: string,
    credential: ClusterCredential,
  ) {
    this.server = createServer((_, res) => res.writeHead(404).end());
    this.server.on('upgrade', (request, socket, head) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const verified = credential.verify(
        request.headers[CLUSTER_TOKEN_HEADER] as string | undefined,
        url.searchParams.get(HOLDER_QUERY) ?? holder,
      );
      if (url.pathname !== CHANNEL_PATH || !verified.ok) {
        socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n');
        return;
      }
      this.wss.handleUpgrade(request, socket, head, (ws) => serveChannel(ws, this.hub, verified.from));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.address = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  row(members = 1, window = 5): PresenceRow {
    return {
      subscriptionId: SUB,
      holder: this.holder,
      instanceId: this.holder.split('/')[0],
      address: this.address,
      members,
      window,
    };
  }

  /** Every channel to this holder breaks (its process died). */
  dropChannels(): void {
    for (const ws of this.wss.clients) ws.terminate();
  }

  async stop(): Promise<void> {
    this.dropChannels();
    this.wss.close();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** What the dispatching side reads of stream_presence: the rows the test says are fresh. */
class FakePresence {
  rows: PresenceRow[] = [];
  holdersOf(subscriptionId: string): Promise<PresenceRow[]> {
    return Promise.resolve(this.rows.filter((r) => r.subscriptionId === subscriptionId));
  }
  forget(): void {}
  knownHoldersOf(subscriptionId: string): PresenceRow[] | undefined {
    return this.known ? this.rows.filter((r) => r.subscriptionId === subscriptionId) : undefined;
  }
  /** Whether the rows count as read a moment ago (the router's fast path) or are read on each delivery. */
  known = false;
}

const until = async <T>(what: string, probe: () => T | undefined | false, timeoutMs = 5000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('ClusterCredential', () => {
  it('takes a token made with a shared key for this holder within a minute, and nothing else', () => {
    let now = 1_000_000;
    const a = new ClusterCredential([KEY], 'k1', () => now);
    const token = a.sign('owner/1', 'holder/2');
    expect(a.verify(token, 'holder/2')).toEqual({ ok: true, from: 'owner/1' });
    expect(a.verify(token, 'holder/3')).toMatchObject({ ok: false, reason: 'bad signature' });
    expect(a.verify(undefined, 'holder/2')).toMatchObject({ ok: false });
    expect(a.verify(token.slice(0, -2) + (token.endsWith('00') ? '11' : '00'), 'holder/2')).toMatchObject({
      ok: false,
    });
    const outsider = new ClusterCredential([{ id: 'k1', key: Buffer.alloc(32, 8) }], 'k1', () => now);
    expect(a.verify(outsider.sign('owner/1', 'holder/2'), 'holder/2')).toMatchObject({
      ok: false,
      reason: 'bad signature',
    });
    // Rotation: a verifier holding the old and the new key takes tokens of either.
    const rotated = new ClusterCredential([{ id: 'k2', key: Buffer.alloc(32, 9) }, KEY], 'k2', () => now);
    expect(a.verify(rotated.sign('o', 'h'), 'h')).toMatchObject({ ok: false, reason: 'unknown key k2' });
    expect(rotated.verify(token, 'holder/2')).toMatchObject({ ok: true });
    now += 61_000;
    expect(a.verify(token, 'holder/2')).toMatchObject({ ok: false, reason: 'token expired' });
  });
});

describe('ClusterStreamRouter over the internal channel', () => {
  const credential = new ClusterCredential([KEY], 'k1');
  let remote: Holder;
  let localHub: StreamHub;
  let presence: FakePresence;
  let peers: PeerChannels;
  let router: ClusterStreamRouter;
  const target = (config: Record<string, unknown> = {}) => ({ id: SUB, config: { ackTimeoutMs: 5000, ...config } });

  beforeEach(async () => {
    remote = await new Holder('b/2', credential).start();
    localHub = new StreamHub(0);
    presence = new FakePresence();
    peers = new PeerChannels(credential, 'a/1');
    router = new ClusterStreamRouter(localHub, presence as unknown as PresenceReader, peers, 'a/1');
  });
  afterEach(async () => {
    peers.close();
    await remote.stop();
  });

  it('forwards to a client on another instance, under the owner epoch, and brings its answers back', async () => {
    const client = member('ws:1');
    remote.hub.connect(client);
    presence.rows = [remote.row()];
    const first = router.deliver(target(), frame, undefined, { epoch: 7 });
    const d = await until('the forwarded delivery', () => client.got[0]);
    expect(d.deliveryId).toMatch(/^7\./);
    expect(d.frame).toEqual(frame);
    expect(remote.hub.answer(d.deliveryId, { kind: 'ack' })).toBe(true);
    expect(await first).toEqual({ kind: 'ack' });

    const second = router.deliver(target(), frame, undefined, { epoch: 7 });
    const d2 = await until('the second delivery', () => client.got[1]);
    remote.hub.answer(d2.deliveryId, { kind: 'nack', delayMs: 321 });
    expect(await second).toEqual({ kind: 'nack', delayMs: 321 });
    const third = router.deliver(target(), frame);
    remote.hub.answer((await until('the third', () => client.got[2])).deliveryId, { kind: 'reject', reason: 'bad' });
    expect(await third).toEqual({ kind: 'reject', reason: 'bad' });
  });

  it('settles what is in flight as gone when the channel is lost, and the holder withdraws it (a late ack is refused)', async () => {
    const client = member('ws:1');
    remote.hub.connect(client);
    presence.rows = [remote.row()];
    const sending = router.deliver(target({ ackTimeoutMs: 60000 }), frame);
    const d = await until('the forwarded delivery', () => client.got[0]);
    remote.dropChannels();
    expect(await sending).toEqual({ kind: 'gone' });
    await until('the holder to withdraw it', () => remote.hub.subscriptionOf(d.deliveryId) === undefined);
    expect(remote.hub.answer(d.deliveryId, { kind: 'ack' })).toBe(false);
  });

  it('delivers again elsewhere after a loss: the lost holder waits out its backoff, a local client takes it', async () => {
    const far = member('ws:far');
    remote.hub.connect(far);
    presence.rows = [remote.row()];
    const sending = router.deliver(target({ ackTimeoutMs: 60000 }), frame);
    await until('the forwarded delivery', () => far.got[0]);
    remote.dropChannels();
    expect(await sending).toEqual({ kind: 'gone' });
    expect(peers.available('b/2')).toBe(false);
    const near = member('sse:near');
    localHub.connect(near);
    const again = router.deliver(target(), frame);
    const d = await until('the local delivery', () => near.got[0]);
    localHub.answer(d.deliveryId, { kind: 'ack' });
    expect(await again).toEqual({ kind: 'ack' });
    expect(far.got).toHaveLength(1);
  });

  it('withdraws a delivery the owner stops waiting for', async () => {
    const client = member('ws:1');
    remote.hub.connect(client);
    presence.rows = [remote.row()];
    const abort = new AbortController();
    const sending = router.deliver(target(), frame, abort.signal);
    const d = await until('the forwarded delivery', () => client.got[0]);
    abort.abort();
    expect(await sending).toEqual({ kind: 'gone' });
    await until('the holder to withdraw it', () => remote.hub.subscriptionOf(d.deliveryId) === undefined);
  });

  it('answers timeout when the client holds a delivery past the ack timeout', async () => {
    const client = member('ws:1');
    remote.hub.connect(client);
    presence.rows = [remote.row()];
    expect(await router.deliver(target({ ackTimeoutMs: 100 }), frame)).toEqual({ kind: 'timeout' });
    expect(client.got).toHaveLength(1);
  });

  it('is gone at once on a holder whose clients left (a stale row), and refuses a handshake without the shared key', async () => {
    presence.rows = [remote.row()];
    expect(await router.deliver(target(), frame)).toEqual({ kind: 'gone' });
    const outsiderPeers = new PeerChannels(
      new ClusterCredential([{ id: 'k1', key: Buffer.alloc(32, 1) }], 'k1'),
      'x/9',
    );
    try {
      expect(await outsiderPeers.deliver(remote.row(), target(), frame, 0)).toEqual({ kind: 'gone' });
      expect(outsiderPeers.available('b/2')).toBe(false);
    } finally {
      outsiderPeers.close();
    }
  });

  it('LOAD_BALANCE: prefers this process while it has room, then the least loaded holder', async () => {
    const near = member('sse:near', 1);
    const far = member('ws:far', 1);
    localHub.connect(near);
    remote.hub.connect(far);
    presence.rows = [remote.row(1, 1)];
    const one = router.deliver(target(), frame);
    await until('the local delivery', () => near.got[0]);
    const two = router.deliver(target(), frame);
    await until('the remote delivery', () => far.got[0]);
    // Both windows full: the third waits for room.
    const three = router.deliver(target(), frame);
    localHub.answer(near.got[0].deliveryId, { kind: 'ack' });
    expect(await one).toEqual({ kind: 'ack' });
    await until('the third, at the freed client', () => near.got[1]);
    remote.hub.answer(far.got[0].deliveryId, { kind: 'ack' });
    localHub.answer(near.got[1].deliveryId, { kind: 'ack' });
    expect([await two, await three]).toEqual([{ kind: 'ack' }, { kind: 'ack' }]);
  });

  it("BROADCAST: every holder, the answers combined as one hub combines its clients'", async () => {
    const near = member('sse:near');
    const far = member('ws:far');
    localHub.connect(near);
    remote.hub.connect(far);
    presence.rows = [remote.row()];
    const answers = async (nearAnswer: StreamOutcome, farAnswer: StreamOutcome) => {
      const n = near.got.length;
      const sending = router.deliver(target({ policy: 'BROADCAST' }), frame);
      const [dn, df] = await until(
        'both deliveries',
        () => near.got.length > n && far.got.length > n && [near.got[n], far.got[n]],
      );
      localHub.answer(dn.deliveryId, nearAnswer);
      remote.hub.answer(df.deliveryId, farAnswer);
      return sending;
    };
    expect(await answers({ kind: 'ack' }, { kind: 'ack' })).toEqual({ kind: 'ack' });
    expect(await answers({ kind: 'ack' }, { kind: 'nack', delayMs: 5 })).toEqual({ kind: 'nack', delayMs: 5 });
    expect(await answers({ kind: 'nack', delayMs: 5 }, { kind: 'reject', reason: 'no' })).toEqual({
      kind: 'reject',
      reason: 'no',
    });
  });

  it('hands a delivery to this process at once while the holders it remembers are this process alone, and weighs a remembered remote holder', async () => {
    presence.known = true;
    const near = member('sse:near', 2);
    localHub.connect(near);
    const one = router.deliver(target(), frame, undefined, { epoch: 3 });
    // Pushed in the same turn: no read of the holders before it.
    expect(near.got.map((d) => d.deliveryId)).toEqual([expect.stringMatching(/^3\./)]);
    // A remote holder remembered, with less of its window held: it takes the next delivery, as the router chooses.
    const far = member('ws:far', 2);
    remote.hub.connect(far);
    presence.rows = [remote.row(1, 2)];
    const two = router.deliver(target(), frame);
    const d = await until('the remote delivery', () => far.got[0]);
    expect(near.got).toHaveLength(1);
    remote.hub.answer(d.deliveryId, { kind: 'ack' });
    localHub.answer(near.got[0].deliveryId, { kind: 'ack' });
    expect([await one, await two]).toEqual([{ kind: 'ack' }, { kind: 'ack' }]);
  });

  it('hands a batch whole to a client here while the holders it remembers are this process alone; with a remote holder, event by event', async () => {
    presence.known = true;
    const frames = [frame, { ...frame, id: 'e2' }];
    const batch = { frames, entries: frames.map((f) => Buffer.from(f.id)) };
    const batches: { deliveryId: string; entries: Buffer[] }[] = [];
    const near = { ...member('ws:near', 2), pushBatch: (d: (typeof batches)[number]) => batches.push(d) };
    localHub.connect(near);
    const whole = router.deliverBatch(target(), batch, undefined, { epoch: 3 });
    // In the same turn, as one delivery under the owner's epoch.
    expect(batches.map((b) => [b.deliveryId, b.entries.map(String)])).toEqual([
      [expect.stringMatching(/^3\./), ['e1', 'e2']],
    ]);
    localHub.answer(batches[0].deliveryId, { kind: 'ack' });
    expect(await whole).toEqual({ kind: 'ack' });
    // A remote holder remembered: its clients take the batch's events one by one (the channel carries events).
    localHub.disconnect(near);
    const far = member('ws:far', 5);
    remote.hub.connect(far);
    presence.rows = [remote.row(1, 5)];
    const spread = router.deliverBatch(target(), batch, undefined, { epoch: 3 });
    await until('both events at the remote client', () => (far.got.length === 2 ? far.got : undefined));
    expect(far.got.map((d) => d.frame.id)).toEqual(['e1', 'e2']);
    remote.hub.answer(far.got[0].deliveryId, { kind: 'ack' });
    remote.hub.answer(far.got[1].deliveryId, { kind: 'reject', reason: 'e2 refused' });
    expect(await spread).toEqual({ kind: 'reject', reason: 'e2 refused' });
    expect(batches).toHaveLength(1);
  });

  it('holds a batch, with nobody connected anywhere, until a client connects here, then hands it whole', async () => {
    const frames = [frame, { ...frame, id: 'e2' }];
    const sending = router.deliverBatch(target(), { frames, entries: frames.map((f) => Buffer.from(f.id)) });
    await new Promise((r) => setTimeout(r, 50));
    const batches: { deliveryId: string; entries: Buffer[] }[] = [];
    const client = { ...member('ws:late'), pushBatch: (d: (typeof batches)[number]) => batches.push(d) };
    localHub.connect(client);
    const b = await until('the batch at the late client', () => batches[0]);
    expect(b.entries.map(String)).toEqual(['e1', 'e2']);
    expect(client.got).toHaveLength(0);
    localHub.answer(b.deliveryId, { kind: 'ack' });
    expect(await sending).toEqual({ kind: 'ack' });
  });

  it('waits, with nobody connected anywhere, until a client connects', async () => {
    const sending = router.deliver(target(), frame);
    let settled = false;
    void sending.then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    const client = member('ws:late');
    remote.hub.connect(client);
    presence.rows = [remote.row()];
    const d = await until('the delivery to the late client', () => client.got[0]);
    remote.hub.answer(d.deliveryId, { kind: 'ack' });
    expect(await sending).toEqual({ kind: 'ack' });
  });
});

import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, SessionAgentStore, StreamPresenceStore } from '@libs/storage';
import { StreamHub, StreamPresence } from '@libs/streams';
import { testConfig } from '../support/env';
import { waitFor } from '../support/wait-for';

/**
 * Which gateway processes hold stream clients of which subscription (`stream_presence`), on Postgres: a holder's
 * rows appear on a connect and go on its last disconnect, a row not renewed in time counts for nothing, and
 * expired rows are deleted; a holder that another process took the holder id over from writes nothing more.
 */
describe('StreamPresenceStore and StreamPresence (real Postgres)', () => {
  let db: DataSource;
  let store: StreamPresenceStore;

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'stream-presence-spec');
    await db.initialize();
    store = new StreamPresenceStore(db);
  });
  afterAll(() => db.destroy());

  it("renews a holder's rows, reads only fresh ones, removes and expires", async () => {
    const sub = randomUUID();
    const holder = `p-${randomUUID().slice(0, 6)}/1`;
    const me = await store.claim(holder);
    await store.renew(me, 'p', 'http://127.0.0.1:1', [{ subscriptionId: sub, members: 2, window: 15 }]);
    // The readers' freshness (5 s) is the promise: rows renewed a moment ago count and rows 10 s old do not, seconds
    // of margin either side even on a loaded host.
    expect(await store.holdersOf(sub, 5000)).toEqual([
      { subscriptionId: sub, holder, instanceId: 'p', address: 'http://127.0.0.1:1', members: 2, window: 15 },
    ]);
    await store.renew(me, 'p', 'http://127.0.0.1:1', [{ subscriptionId: sub, members: 1, window: 5 }]);
    expect((await store.holdersOf(sub, 5000)).map((r) => [r.members, r.window])).toEqual([[1, 5]]);
    // Not renewed for longer than the reader's freshness: a dead process's row counts for nothing.
    await db.query(`UPDATE stream_presence SET renewed_at = now() - interval '10 seconds' WHERE holder = $1`, [holder]);
    expect(await store.holdersOf(sub, 5000)).toEqual([]);
    expect(await store.expire(5000)).toBeGreaterThanOrEqual(1);
    expect(await db.query(`SELECT 1 FROM stream_presence WHERE holder = $1`, [holder])).toEqual([]);
    await store.renew(me, 'p', 'http://127.0.0.1:1', [{ subscriptionId: sub, members: 1, window: 5 }]);
    await store.remove(me, [sub]);
    expect(await store.holdersOf(sub, 5000)).toEqual([]);
  });

  it('refuses a stale holder after a takeover of its holder id: its renewal and removal write nothing', async () => {
    const sub = randomUUID();
    const other = randomUUID();
    const holder = `t-${randomUUID().slice(0, 6)}/1`;
    const rows = () =>
      db.query(`SELECT subscription_id, address, members FROM stream_presence WHERE holder = $1 ORDER BY address`, [
        holder,
      ]);
    const old = await store.claim(holder);
    expect(await store.renew(old, 't', 'http://old', [{ subscriptionId: sub, members: 1, window: 1 }])).toBe(true);
    // Another process comes to bear the holder id (a restarted container, pid 1 again) and writes its rows.
    const taker = await store.claim(holder);
    expect(taker.epoch).toBe(old.epoch + 1);
    expect(await store.renew(taker, 't', 'http://new', [{ subscriptionId: sub, members: 3, window: 9 }])).toBe(true);
    // The old process wakes up: its renewal is refused, of a row the taker has and of one it has not.
    expect(
      await store.renew(old, 't', 'http://old', [
        { subscriptionId: sub, members: 1, window: 1 },
        { subscriptionId: other, members: 1, window: 1 },
      ]),
    ).toBe(false);
    await store.remove(old);
    expect(await rows()).toEqual([{ subscription_id: sub, address: 'http://new', members: 3 }]);
    await store.remove(taker);
    expect(await rows()).toEqual([]);
  });

  it("refuses a stale holder's session agent rows after a takeover of its holder id, apart from its stream presence", async () => {
    const agents = new SessionAgentStore(db);
    const holder = `a-${randomUUID().slice(0, 6)}/1`;
    const replica = (replicaId: string, sessions: number) => ({
      replicaId,
      tenant: 't',
      agent: 'echo',
      sessions,
      stats: {},
      since: new Date().toISOString(),
    });
    const rows = () =>
      db.query(`SELECT replica_id, address, sessions FROM session_agents WHERE holder = $1 ORDER BY replica_id`, [
        holder,
      ]);
    const old = await agents.claim(holder);
    // The same process's stream presence claims its own epoch: it does not fence its session agents.
    await store.claim(holder);
    expect(await agents.renew(old, 'a', 'http://old', [replica(`${holder}-r1`, 1)])).toBe(true);
    const taker = await agents.claim(holder);
    expect(await agents.renew(taker, 'a', 'http://new', [replica(`${holder}-r2`, 4)])).toBe(true);
    expect(await agents.renew(old, 'a', 'http://old', [replica(`${holder}-r1`, 2), replica(`${holder}-r3`, 1)])).toBe(
      false,
    );
    await agents.remove(old);
    expect(await rows()).toEqual([
      { replica_id: `${holder}-r1`, address: 'http://old', sessions: 1 },
      { replica_id: `${holder}-r2`, address: 'http://new', sessions: 4 },
    ]);
    await agents.remove(taker);
    expect(await rows()).toEqual([]);
  });

  it("stops publishing a hub's clients once a newer process bears its holder id", async () => {
    const hub = new StreamHub(0);
    const holder = `s-${randomUUID().slice(0, 6)}/3`;
    const presence = new StreamPresence(store, hub, { holder, instanceId: 's', address: 'http://old' });
    presence.start();
    const sub = randomUUID();
    try {
      hub.connect({ id: 'a', subscriptionId: sub, window: 3, push: () => undefined });
      await waitFor('the old row', async () => (await store.holdersOf(sub, 5000))[0]?.address === 'http://old');
      const taker = await store.claim(holder);
      await store.renew(taker, 's', 'http://new', [{ subscriptionId: sub, members: 5, window: 5 }]);
      // The old process's renewals (every second) meet the newer epoch: the taker's row stays as it wrote it.
      await waitFor('a renewal of the old process refused', () => presence.stale, { timeoutMs: 20000 });
      expect(await store.holdersOf(sub, 5000)).toMatchObject([{ address: 'http://new', members: 5 }]);
    } finally {
      await presence.close();
    }
    expect(await store.holdersOf(sub, 5000)).toMatchObject([{ address: 'http://new' }]);
  });

  it("publishes a hub's clients at once on a connect, and deletes the row on the last disconnect and on close", async () => {
    const hub = new StreamHub(0);
    const holder = `g-${randomUUID().slice(0, 6)}/2`;
    const presence = new StreamPresence(store, hub, { holder, instanceId: 'g', address: 'http://127.0.0.1:2' });
    presence.start();
    const sub = randomUUID();
    const member = (id: string) => ({ id, subscriptionId: sub, window: 3, push: () => undefined });
    try {
      const a = member('a');
      const b = member('b');
      hub.connect(a);
      hub.connect(b);
      await waitFor('the row with both clients', async () => (await store.holdersOf(sub, 5000))[0]?.members === 2);
      expect((await store.holdersOf(sub, 5000))[0]).toMatchObject({ holder, window: 6 });
      hub.disconnect(a);
      await waitFor('one client left', async () => (await store.holdersOf(sub, 5000))[0]?.members === 1);
      hub.disconnect(b);
      await waitFor('the row gone with the last client', async () => (await store.holdersOf(sub, 5000)).length === 0);
      hub.connect(member('c'));
      await waitFor('the row again', async () => (await store.holdersOf(sub, 5000)).length === 1);
    } finally {
      await presence.close();
    }
    expect(await store.holdersOf(sub, 5000)).toEqual([]);
  });
});

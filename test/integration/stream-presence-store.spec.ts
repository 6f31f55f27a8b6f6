import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource, StreamPresenceStore } from '../../libs/storage';
import { StreamHub, StreamPresence } from '../../libs/streams';
import { testConfig } from '../support/env';
import { waitFor } from '../support/wait-for';

/**
 * Which gateway processes hold stream clients of which subscription (`stream_presence`), on Postgres: a holder's
 * rows appear on a connect and go on its last disconnect, a row not renewed in time counts for nothing, and
 * expired rows are deleted.
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
    await store.renew(holder, 'p', 'http://127.0.0.1:1', [{ subscriptionId: sub, members: 2, window: 15 }]);
    // The readers' freshness (5 s) is the promise: rows renewed a moment ago count and rows 10 s old do not, seconds
    // of margin either side even on a loaded host.
    expect(await store.holdersOf(sub, 5000)).toEqual([
      { subscriptionId: sub, holder, instanceId: 'p', address: 'http://127.0.0.1:1', members: 2, window: 15 },
    ]);
    await store.renew(holder, 'p', 'http://127.0.0.1:1', [{ subscriptionId: sub, members: 1, window: 5 }]);
    expect((await store.holdersOf(sub, 5000)).map((r) => [r.members, r.window])).toEqual([[1, 5]]);
    // Not renewed for longer than the reader's freshness: a dead process's row counts for nothing.
    await db.query(`UPDATE stream_presence SET renewed_at = now() - interval '10 seconds' WHERE holder = $1`, [holder]);
    expect(await store.holdersOf(sub, 5000)).toEqual([]);
    expect(await store.expire(5000)).toBeGreaterThanOrEqual(1);
    expect(await db.query(`SELECT 1 FROM stream_presence WHERE holder = $1`, [holder])).toEqual([]);
    await store.renew(holder, 'p', 'http://127.0.0.1:1', [{ subscriptionId: sub, members: 1, window: 5 }]);
    await store.remove(holder, [sub]);
    expect(await store.holdersOf(sub, 5000)).toEqual([]);
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

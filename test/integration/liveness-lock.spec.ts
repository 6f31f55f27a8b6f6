import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource } from 'typeorm';
import { LivenessLock } from '@libs/ownership';
import { createDataSource, LeaseStore } from '@libs/storage';
import { testConfig } from '../support/env';
import { waitFor } from '../support/wait-for';

const TIMING = { everyMs: 50, windowMs: 250 };

describe('LivenessLock: an owner session ended is a crash its peers see, and the owner holds first (real Postgres)', () => {
  let db: DataSource;
  const locks: LivenessLock[] = [];

  beforeAll(async () => {
    db = createDataSource(testConfig().postgres, 'liveness-lock-spec');
    await db.initialize();
  });
  afterAll(async () => {
    await Promise.all(locks.map((l) => l.stop()));
    await db.destroy();
  });

  const started = async (instanceId: string, timing = TIMING) => {
    const lock = new LivenessLock(testConfig().postgres, { instanceId, ...timing });
    const released: string[][] = [];
    lock.onReleased = (owners) => released.push(owners);
    locks.push(lock);
    await lock.start(5000);
    return { lock, released };
  };
  /** A partition owner the peers watch (they read `partition_leases.owner`). */
  const owning = async (prefix: string) => {
    const owner = `${prefix}-${randomUUID().slice(0, 8)}`;
    await new LeaseStore(db).claim(`liveness-${randomUUID().slice(0, 8)}`, 0, owner, 1);
    return owner;
  };

  it('a process gone (its session ended): its peer reads its lock released and can take it', async () => {
    const owner = await owning('gone');
    const a = await started(owner);
    const b = await started(`peer-${randomUUID().slice(0, 8)}`);
    // While the owner's session holds the lock, no peer can take it.
    expect(await b.lock.lockPeer(owner)).toBe(false);
    await a.lock.stop();
    await waitFor('the peer to find the owner lock released', () => b.released.flat().includes(owner));
    expect(await b.lock.lockPeer(owner)).toBe(true);
    await b.lock.unlockPeer(owner);
  });

  it('the server ends a live owner session: by the end of the window the owner counts itself not live, and cannot take its lock back while a peer holds it', async () => {
    const owner = await owning('live');
    // The owner retries a fifth of a second apart, so the peer (trying every 5 ms) takes the released lock first.
    const a = await started(owner, { everyMs: 200, windowMs: 800 });
    const b = await started(`peer-${randomUUID().slice(0, 8)}`);
    expect(a.lock.confirmed()).toBe(true);

    const ended: unknown[] = await db.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
      [`eventmesh-${owner}-liveness`],
    );
    expect(ended).toHaveLength(1);
    await waitFor('the peer to take the released lock', () => b.lock.lockPeer(owner), { intervalMs: 5 });
    // The peer waits the window, as CrashWatch does before it ends the owner's lease.
    await sleep(800);
    expect(a.lock.confirmed()).toBe(false);
    // The owner's retries (every 200 ms) cannot take its lock back while the peer holds it.
    await sleep(5 * 200);
    expect(a.lock.confirmed()).toBe(false);
    expect(a.lock.acquiredAt()).toBe(0);

    await b.lock.unlockPeer(owner);
    await waitFor('the owner to take its lock again', () => a.lock.confirmed());
  });
});

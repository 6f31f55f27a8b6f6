import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource } from 'typeorm';
import { LivenessLock } from '../../libs/ownership';
import { createDataSource, LeaseStore } from '../../libs/storage';
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

  const started = async (instanceId: string) => {
    const lock = new LivenessLock(testConfig().postgres, { instanceId, ...TIMING });
    const released: string[][] = [];
    lock.onReleased = (owners) => released.push(owners);
    locks.push(lock);
    await lock.start(5000);
    return { lock, released };
  };

  it('ends the owner: its peer finds the lock released, and by the end of the window the owner no longer counts itself live nor can take the lock back', async () => {
    const owner = `live-${randomUUID().slice(0, 8)}`;
    const topic = `liveness-${randomUUID().slice(0, 8)}`;
    await new LeaseStore(db).claim(topic, 0, owner, 1);
    const a = await started(owner);
    const b = await started(`peer-${randomUUID().slice(0, 8)}`);
    expect(a.lock.confirmed()).toBe(true);
    // While the owner's session holds the lock, no peer can take it.
    expect(await b.lock.lockPeer(owner)).toBe(false);

    // The server ends the owner's session, as it does when the process dies or its connection breaks.
    const ended: unknown[] = await db.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
      [`eventmesh-${owner}-liveness`],
    );
    expect(ended).toHaveLength(1);
    await waitFor('the peer to find the owner lock released', () => b.released.flat().includes(owner));
    // The peer takes the lock and waits the window, as CrashWatch does before it ends the owner's lease.
    expect(await b.lock.lockPeer(owner)).toBe(true);
    await sleep(TIMING.windowMs);
    expect(a.lock.confirmed()).toBe(false);
    // The owner's retries cannot take its lock back while the peer holds it.
    await sleep(5 * TIMING.everyMs);
    expect(a.lock.confirmed()).toBe(false);
    expect(a.lock.acquiredAt()).toBe(0);

    await b.lock.unlockPeer(owner);
    await waitFor('the owner to take its lock again', () => a.lock.confirmed());
  });
});

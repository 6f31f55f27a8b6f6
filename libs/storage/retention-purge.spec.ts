import { RetentionPurge } from './retention-purge';

/** The store's contract: deletes at most `limit` letters older than the cutoff and answers how many. */
class FakeStore {
  calls: Date[] = [];
  failNext = false;
  constructor(public created: Date[]) {}
  async purgeOlderThan(cutoff: Date, limit = 500): Promise<number> {
    this.calls.push(cutoff);
    if (this.failNext) {
      this.failNext = false;
      throw new Error('connection terminated');
    }
    const old = this.created.filter((c) => c < cutoff).slice(0, limit);
    this.created = this.created.filter((c) => !old.includes(c));
    return old.length;
  }
}

const DAY = 86400000;
const now = Date.parse('2026-12-01T00:00:00Z');
const aged = (days: number, n: number) => Array.from({ length: n }, (_, i) => new Date(now - days * DAY - i));

describe('RetentionPurge', () => {
  it('deletes the letters older than the retention period, in batches, and nothing newer', async () => {
    const store = new FakeStore([...aged(31, 25), ...aged(29, 5)]);
    const retention = new RetentionPurge(store, { retentionDays: 30, batchSize: 10 });
    expect(await retention.purge(now)).toBe(25);
    expect(store.created).toHaveLength(5);
    // 10 + 10 + 5: the short batch ends the purge.
    expect(store.calls).toHaveLength(3);
    expect(store.calls[0].toISOString()).toBe('2026-11-01T00:00:00.000Z');
  });

  it('stops a purge after its last batch and leaves the rest for the next one', async () => {
    const store = new FakeStore(aged(40, 50));
    const retention = new RetentionPurge(store, { retentionDays: 30, batchSize: 10, maxBatches: 2 });
    expect(await retention.purge(now)).toBe(20);
    expect(await retention.purge(now)).toBe(20);
    expect(store.created).toHaveLength(10);
  });

  it('throws a failed purge (its activity is retried), and the next purge goes on', async () => {
    const store = new FakeStore(aged(40, 3));
    store.failNext = true;
    const retention = new RetentionPurge(store, { retentionDays: 30 });
    await expect(retention.purge(now)).rejects.toThrow('connection terminated');
    expect(await retention.purge(now)).toBe(3);
  });

  it('deletes nothing when retention is 0 (kept until the subscription is deleted)', async () => {
    const store = new FakeStore(aged(4000, 3));
    expect(await new RetentionPurge(store, { retentionDays: 0 }).purge(now)).toBe(0);
    expect(store.calls).toHaveLength(0);
  });
});

import type { OrphanRow, PlacementMove, PlacementStore, TakeoverResult } from '@libs/storage';
import { OrphanTakeover, OrphanTakeoverOptions } from './orphan-takeover';

/**
 * A placement store in memory with the real one's contract: a takeover moves only orphans of other instances on
 * the given topics, at most `max`, each once, and fences the old instance's run with its next epoch.
 */
class FakePlacementStore {
  orphanRows: OrphanRow[] = [];
  live: string[] = [];
  epochs = new Map<string, number>();
  readonly takes: { to: string; topics: string[]; max: number }[] = [];

  orphan(instanceId: string, topic: string, n: number): void {
    for (let i = 0; i < n; i++) {
      this.orphanRows.push({
        subscriptionId: `${instanceId}-${topic}-${i}`,
        topic,
        protocol: 'HTTP',
        instanceId,
        lastRenewedAt: null,
        orphanedSince: new Date(0),
      });
    }
  }

  async orphans(): Promise<OrphanRow[]> {
    return [...this.orphanRows];
  }

  async liveInstances(): Promise<string[]> {
    return [...this.live];
  }

  async takeOrphans(to: string, topics: string[], _graceMs: number, max: number): Promise<TakeoverResult> {
    this.takes.push({ to, topics, max });
    const taken = this.orphanRows.filter((o) => o.instanceId !== to && topics.includes(o.topic)).slice(0, max);
    this.orphanRows = this.orphanRows.filter((o) => !taken.includes(o));
    const moves = taken.map((o): PlacementMove => {
      const fencedEpoch = (this.epochs.get(o.instanceId) ?? 0) + 1;
      this.epochs.set(o.instanceId, fencedEpoch);
      return { subscriptionId: o.subscriptionId, from: o.instanceId, to, fencedEpoch };
    });
    return { moves, skippedInstances: [] };
  }
}

describe('OrphanTakeover', () => {
  const options: OrphanTakeoverOptions = { instanceId: 'me', topics: ['orders'], graceMs: 20000, mode: 'AUTOMATIC' };
  const takeover = (store: FakePlacementStore, overrides: Partial<OrphanTakeoverOptions> = {}) =>
    new OrphanTakeover(store as unknown as PlacementStore, { ...options, ...overrides });

  it('takes its fair share: the orphans it can dispatch divided by the live instances, rounded up', async () => {
    const store = new FakePlacementStore();
    store.orphan('dead', 'orders', 5);
    store.live = ['me', 'other'];
    const moves = await takeover(store).round();
    expect(store.takes).toEqual([{ to: 'me', topics: ['orders'], max: 3 }]);
    expect(moves.map((m) => m.subscriptionId)).toEqual(['dead-orders-0', 'dead-orders-1', 'dead-orders-2']);
    expect(moves.every((m) => m.from === 'dead' && m.to === 'me')).toBe(true);
  });

  it('leaves orphans on topics it does not serve to the instances that serve them', async () => {
    const store = new FakePlacementStore();
    store.orphan('dead', 'payments', 2);
    store.live = ['me'];
    const t = takeover(store);
    expect(await t.round()).toEqual([]);
    expect(store.takes).toEqual([]);
    expect(t.status()).toMatchObject({ orphans: 2, taken: 0 });
  });

  it('takes nothing while its own dispatch run is not live', async () => {
    const store = new FakePlacementStore();
    store.orphan('dead', 'orders', 2);
    store.live = ['other'];
    expect(await takeover(store).round()).toEqual([]);
    expect(store.takes).toEqual([]);
  });

  it('only reports orphans when MANUAL', async () => {
    const store = new FakePlacementStore();
    store.orphan('dead', 'orders', 2);
    store.live = ['me'];
    const t = takeover(store, { mode: 'MANUAL' });
    expect(await t.round()).toEqual([]);
    expect(store.takes).toEqual([]);
    expect(t.status()).toMatchObject({ mode: 'MANUAL', rounds: 1, orphans: 2, taken: 0 });
  });

  it('rounds every quarter of the grace, between 1 and 30 seconds', () => {
    expect(OrphanTakeover.intervalFor(6000)).toBe(1500);
    expect(OrphanTakeover.intervalFor(180000)).toBe(30000);
    expect(OrphanTakeover.intervalFor(2000)).toBe(1000);
  });

  it('stops its rounds when stopped', async () => {
    jest.useFakeTimers();
    try {
      const store = new FakePlacementStore();
      const t = takeover(store);
      t.start();
      await jest.advanceTimersByTimeAsync(5000 * 2);
      const rounds = t.status().rounds;
      expect(rounds).toBeGreaterThanOrEqual(1);
      await t.stop();
      await jest.advanceTimersByTimeAsync(5000 * 4);
      expect(t.status().rounds).toBe(rounds);
    } finally {
      jest.useRealTimers();
    }
  });
});

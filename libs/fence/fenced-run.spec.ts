import type { EntityManager } from 'typeorm';
import { StaleEpochError, type WriteFence } from './epoch-fence';
import { runFenced, type FencedRefusal, type FencedRun } from './fenced-run';

const TTL_MS = 1000;
const BEAT_MS = TTL_MS / 5;
const scope = { kind: 'dispatch-run', instanceId: 'i1' } as const;

/** An epoch row in memory: a claim takes the next epoch; renewals and writes pass only under the current one. */
class FakeRow {
  epoch = 0;
  renewals = 0;
  /** Set: every renewal waits for it to resolve (a renewal stuck in Postgres). */
  pending?: Promise<void>;
  claim = async () => ++this.epoch;
  renew = async (epoch: number) => {
    this.renewals++;
    await this.pending;
    return epoch === this.epoch;
  };
  fenceFor = (epoch: number): WriteFence => ({
    epoch,
    rowEpoch: epoch,
    run: async <T>(work: (m: EntityManager | undefined) => Promise<T>) => {
      if (epoch !== this.epoch) throw new StaleEpochError(scope, epoch, this.epoch);
      return work(undefined);
    },
  });
}

/**
 * A body that makes a round (with one fenced write, unless `writes` is off) every 10 ms until its stop signal
 * aborts, or, once `stuck`, none; `failWith` makes its next round fail. The fenced refusal a run ends with is its
 * result, so a case sees it without a failure type.
 */
function setup(options: { meansAlive?: boolean } = {}) {
  const row = new FakeRow();
  const shutdown = new AbortController();
  const warnings: string[] = [];
  const body = {
    heartbeats: 0,
    stuck: false,
    writes: true,
    failWith: undefined as Error | undefined,
    closed: false,
    lastRoundAt: 0,
    stop: undefined as AbortSignal | undefined,
    fencedOff: undefined as AbortSignal | undefined,
  };
  const spec: FencedRun<'stopped' | FencedRefusal> = {
    scope,
    log: { warn: (message) => warnings.push(message) },
    claim: row.claim,
    fenceFor: row.fenceFor,
    open: ({ fence, stop, fencedOff }) => {
      body.stop = stop;
      body.fencedOff = fencedOff;
      body.lastRoundAt = Date.now();
      return {
        heartbeat: () => body.heartbeats++,
        lastRoundAt: () => body.lastRoundAt,
        close: async () => void (body.closed = true),
        run: async () => {
          while (!stop.aborted) {
            await new Promise((r) => setTimeout(r, 10));
            if (body.stuck) continue;
            if (body.failWith) throw body.failWith;
            if (body.writes) await fence.run(async () => undefined);
            body.lastRoundAt = Date.now();
          }
          return 'stopped' as const;
        },
      };
    },
    stop: shutdown.signal,
    beatEveryMs: BEAT_MS,
    leaseTtlMs: TTL_MS,
    renewal: { renew: row.renew, meansAlive: options.meansAlive ?? true },
    fenced: (refusal) => refusal,
  };
  let settled = false;
  const result = runFenced(spec).finally(() => (settled = true));
  result.catch(() => undefined); // a case that expects a failure awaits it later
  return { row, shutdown, warnings, body, result, settled: () => settled };
}

/** Shuts the run down: its body returns at its next round, and the run with it. */
async function shutDown(run: ReturnType<typeof setup>): Promise<void> {
  run.shutdown.abort();
  await jest.advanceTimersByTimeAsync(10);
  expect(run.settled()).toBe(true);
  await expect(run.result).resolves.toBe('stopped');
}

describe('runFenced: claim, fence, heartbeat and renew on one clock, stop when refused', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('stops the body and ends fenced when its renewal is refused', async () => {
    const run = setup();
    run.body.writes = false; // nothing refused but the renewal
    await jest.advanceTimersByTimeAsync(BEAT_MS / 2);
    run.row.epoch++; // a newer run claimed the row
    expect(run.body.fencedOff?.aborted).toBe(false);
    await jest.advanceTimersByTimeAsync(BEAT_MS);
    expect(run.body.stop?.aborted).toBe(true);
    expect(run.body.fencedOff?.aborted).toBe(true);
    await jest.advanceTimersByTimeAsync(10);
    expect(run.settled()).toBe(true);
    await expect(run.result).resolves.toEqual({
      epoch: 1,
      message: 'the dispatch run of instance i1 moved past epoch 1; its renewal was refused',
    });
    expect(run.body.closed).toBe(true);
  });

  it('ends fenced, with the refusal, when a write under its epoch is refused', async () => {
    const run = setup();
    await jest.advanceTimersByTimeAsync(50);
    run.row.epoch++;
    await jest.advanceTimersByTimeAsync(10);
    expect(run.settled()).toBe(true);
    await expect(run.result).resolves.toEqual({
      epoch: 1,
      message: 'the dispatch run of instance i1 is held under epoch 2; a write under epoch 1 was refused',
    });
  });

  it('lets any other error of the body through', async () => {
    const run = setup();
    run.body.failWith = new Error('the broker went away');
    await jest.advanceTimersByTimeAsync(10);
    expect(run.settled()).toBe(true);
    await expect(run.result).rejects.toThrow('the broker went away');
    expect(run.body.closed).toBe(true);
  });

  it('withholds the heartbeat and the renewal while the body makes no round within a lease TTL', async () => {
    const run = setup();
    await jest.advanceTimersByTimeAsync(TTL_MS);
    expect(run.body.heartbeats).toBeGreaterThanOrEqual(4);
    expect(run.row.renewals).toBeGreaterThanOrEqual(4);
    run.body.stuck = true;
    await jest.advanceTimersByTimeAsync(TTL_MS);
    const [heartbeats, renewals] = [run.body.heartbeats, run.row.renewals];
    await jest.advanceTimersByTimeAsync(3 * TTL_MS);
    expect([run.body.heartbeats, run.row.renewals]).toEqual([heartbeats, renewals]);
    expect(run.warnings).toContain(
      'dispatch loop made no round within a lease TTL; withholding the heartbeat and the renewal',
    );
    await shutDown(run);
  });

  it('goes on renewing a stuck body when the renewal only confirms the epoch (not that the run is alive)', async () => {
    const run = setup({ meansAlive: false });
    run.body.stuck = true;
    await jest.advanceTimersByTimeAsync(2 * TTL_MS);
    const [heartbeats, renewals] = [run.body.heartbeats, run.row.renewals];
    await jest.advanceTimersByTimeAsync(2 * TTL_MS);
    expect(run.body.heartbeats).toBe(heartbeats);
    expect(run.row.renewals).toBeGreaterThanOrEqual(renewals + 8);
    await shutDown(run);
  });

  it('has one renewal in flight at a time, and reports one pending for a lease TTL once', async () => {
    const run = setup();
    let answer!: () => void;
    run.row.pending = new Promise((resolve) => (answer = resolve));
    await jest.advanceTimersByTimeAsync(4 * TTL_MS);
    expect(run.row.renewals).toBe(1);
    expect(run.warnings).toEqual(['dispatch run renewal pending for more than a lease TTL']);
    run.row.pending = undefined;
    answer();
    await jest.advanceTimersByTimeAsync(2 * BEAT_MS);
    expect(run.row.renewals).toBe(3);
    await shutDown(run);
  });

  it('returns what the body returns when its stop signal aborts (a shutdown), and beats no more', async () => {
    const run = setup();
    await jest.advanceTimersByTimeAsync(TTL_MS);
    await shutDown(run);
    expect(run.body.closed).toBe(true);
    const [heartbeats, renewals] = [run.body.heartbeats, run.row.renewals];
    await jest.advanceTimersByTimeAsync(2 * TTL_MS);
    expect([run.body.heartbeats, run.row.renewals]).toEqual([heartbeats, renewals]);
  });
});

import { ActivityCancellationDetails, ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { EntityManager } from 'typeorm';
import { newProgress, type DispatchLoop, type DispatchProgress } from '@libs/delivery';
import { StaleEpochError, WriteFence } from '@libs/fence';
import { DISPATCH_RUN_FENCED, type DispatchRunResult } from '../contracts';
import { createDispatchActivities } from './dispatch.activities';

/** The dispatch_runs contract (dispatch-run-store.ts): each claim takes the next epoch; renewals and writes only under the current one. */
class FakeRuns {
  epoch = 0;
  readonly claims: string[] = [];
  readonly renewals: { epoch: number; at: number }[] = [];
  async claim(_instanceId: string, owner: string): Promise<number> {
    this.claims.push(owner);
    return ++this.epoch;
  }
  async renew(_instanceId: string, epoch: number): Promise<boolean> {
    this.renewals.push({ epoch, at: Date.now() });
    return epoch === this.epoch;
  }
  fenceFor(instanceId: string, epoch: number): WriteFence {
    return {
      epoch,
      rowEpoch: 0,
      run: async <T>(work: (m: EntityManager | undefined) => Promise<T>) => {
        if (epoch !== this.epoch) throw new StaleEpochError({ kind: 'dispatch-run', instanceId }, epoch, this.epoch);
        return work(undefined);
      },
    };
  }
}

const progress: DispatchProgress = newProgress();

/**
 * A loop that completes a round (and one fenced write) every 10 ms until stopped, or, `stuck`, none at all. It
 * records what ended it: its stop signal, or its deadline.
 */
function fakeLoop(fence: WriteFence, stuck = false) {
  const loop = {
    fence,
    lastRoundAt: Date.now(),
    snapshot: progress,
    endedBy: undefined as 'stop' | 'deadline' | undefined,
    async run(stop: AbortSignal, deadline: number): Promise<DispatchProgress> {
      while (!stop.aborted && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
        if (stuck) continue;
        await fence.run(async () => undefined);
        loop.lastRoundAt = Date.now();
      }
      loop.endedBy = stop.aborted ? 'stop' : 'deadline';
      return progress;
    },
  };
  return loop;
}

function setup(leaseTtlMs = 1000, stuck = false) {
  const runs = new FakeRuns();
  const loops: ReturnType<typeof fakeLoop>[] = [];
  const activities = createDispatchActivities({
    instanceId: 'i1',
    runs,
    leaseTtlMs,
    shutdownSignal: new AbortController().signal,
    createLoop: (fence) => {
      const loop = fakeLoop(fence, stuck);
      loops.push(loop);
      return loop as unknown as DispatchLoop;
    },
  });
  return { runs, loops, activities };
}

describe('pollAndDispatch: one dispatch run per attempt, fenced by its epoch', () => {
  it('claims the next epoch for each attempt and runs its loop behind that epoch', async () => {
    const { runs, loops, activities } = setup();
    await new MockActivityEnvironment({ attempt: 3 }).run(activities.pollAndDispatch, { instanceId: 'i1', runMs: 50 });
    expect(runs.claims).toEqual([`i1@${process.pid} attempt 3`]);
    expect(loops[0].fence.epoch).toBe(1);
  });

  it('renews its epoch at least every fifth of the lease TTL while its loop is alive', async () => {
    // On a fake clock: the gaps are the activity's own schedule, not how late a busy machine runs its timers, so
    // they are held to the fifth of the TTL (200 ms) exactly.
    jest.useFakeTimers();
    try {
      const { runs, activities } = setup(1000);
      const started = Date.now();
      const run = new MockActivityEnvironment().run(activities.pollAndDispatch, { instanceId: 'i1', runMs: 1300 });
      await jest.advanceTimersByTimeAsync(1300);
      await run;
      const times = [started, ...runs.renewals.map((r) => r.at)];
      const gaps = times.slice(1).map((t, i) => t - times[i]);
      expect(runs.renewals.length).toBeGreaterThanOrEqual(4);
      expect(Math.max(...gaps)).toBeLessThanOrEqual(200);
      expect(runs.renewals.every((r) => r.epoch === 1)).toBe(true);
    } finally {
      jest.useRealTimers();
    }
  });

  it('renews nothing while its loop makes no round, so a takeover sees it as gone', async () => {
    const { runs, activities } = setup(300, true);
    await new MockActivityEnvironment().run(activities.pollAndDispatch, { instanceId: 'i1', runMs: 900 });
    // Renewals only within the first TTL after the start (the loop's last round is its start).
    expect(runs.renewals.filter((r) => r.at > runs.renewals[0]?.at + 300)).toEqual([]);
  });

  it('fails retryably when a newer attempt claimed the epoch: the loop is refused its next write', async () => {
    const { runs, activities } = setup(60000);
    const env = new MockActivityEnvironment();
    const run = env.run(activities.pollAndDispatch, { instanceId: 'i1', runMs: 10000 });
    await new Promise((r) => setTimeout(r, 30));
    await runs.claim('i1', 'a newer attempt');
    const failure = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: DISPATCH_RUN_FENCED, nonRetryable: false });
    expect((failure as Error).message).toContain(
      'the dispatch run of instance i1 is held under epoch 2; a write under epoch 1 was refused',
    );
  });

  it('fails retryably when its renewal is refused, even before its loop writes', async () => {
    const { runs, activities } = setup(500, true);
    const run = new MockActivityEnvironment().run(activities.pollAndDispatch, { instanceId: 'i1', runMs: 10000 });
    await runs.claim('i1', 'a newer attempt');
    const failure = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toMatchObject({ type: DISPATCH_RUN_FENCED, nonRetryable: false });
    expect((failure as Error).message).toContain('moved past epoch 1');
  });

  it('goes on when the SDK timed the attempt out by itself (no heartbeat confirmed on a dead link): delivery needs no Temporal', async () => {
    const { loops, activities } = setup(60000);
    const env = new MockActivityEnvironment();
    const started = Date.now();
    const run = env.run(activities.pollAndDispatch, { instanceId: 'i1', runMs: 400 });
    await new Promise((r) => setTimeout(r, 30));
    // What the SDK's local heartbeat timer sends (sdk-core: reason TIMED_OUT, details not found and timed out).
    env.cancel('TIMED_OUT', new ActivityCancellationDetails({ timedOut: true, notFound: true }));
    const result = (await run) as DispatchRunResult;
    expect(result.stoppedBy).toBe('deadline');
    expect(Date.now() - started).toBeGreaterThanOrEqual(390);
    expect(loops).toHaveLength(1);
  });

  it.each([
    ['the server no longer knows the attempt', 'NOT_FOUND', { notFound: true }],
    ['the workflow cancelled it', 'CANCELLED', { cancelRequested: true }],
    ['the worker shuts down', 'WORKER_SHUTDOWN', { workerShutdown: true }],
  ] as const)('stops its loop when %s', async (_what, reason, details) => {
    const { loops, activities } = setup(60000);
    const env = new MockActivityEnvironment();
    const run = env.run(activities.pollAndDispatch, { instanceId: 'i1', runMs: 10000 });
    await new Promise((r) => setTimeout(r, 30));
    env.cancel(reason, new ActivityCancellationDetails(details));
    const failure = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(CancelledFailure);
    // Stopped by the cancellation, not by running out its 10 s: the loop saw its stop signal.
    expect(loops.map((l) => l.endedBy)).toEqual(['stop']);
  });
});

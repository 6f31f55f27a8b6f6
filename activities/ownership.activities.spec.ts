import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { newProgress, type DispatchLoop, type DispatchProgress } from '@libs/delivery';
import type { LeaseStore } from '@libs/storage';
import type { WriteFence } from '@libs/fence';
import { LEASE_RUN_ENDED } from '../contracts';
import { createOwnershipActivities, type OwnershipActivityDeps } from './ownership.activities';

const progress: DispatchProgress = newProgress();

/** Partition leases that take every claim and renewal (the epoch fence is not what these cases are about). */
const leases = {
  claim: async () => ({ claimed: true as const }),
  renew: async () => true,
  fenceFor: (): WriteFence => ({ epoch: 1, rowEpoch: 1, run: (work) => work(undefined) }),
} as unknown as LeaseStore;

/** The instance's membership as its OwnershipAgent would answer: the lease run it holds, and which one Temporal confirmed. */
class Membership {
  constructor(
    public current: string | undefined,
    public confirmed: string | undefined,
  ) {}
  currentLeaseRun() {
    return this.current;
  }
  confirmedFor(leaseRunId: string | undefined) {
    return leaseRunId !== undefined && leaseRunId === this.confirmed;
  }
}

function setup(membership: Membership, maxOwnedPartitions = 1000) {
  const gates: (() => boolean)[] = [];
  const shutdown = new AbortController();
  const deps: OwnershipActivityDeps = {
    instanceId: 'o1',
    leaseTtlMs: 1000,
    maxOwnedPartitions,
    shutdownSignal: shutdown.signal,
    leases,
    membership,
    async openPartitionLoop(scope) {
      gates.push(scope.gate);
      const loop = {
        lastRoundAt: Date.now(),
        snapshot: progress,
        async run(stop: AbortSignal, deadline: number) {
          while (!stop.aborted && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 10));
            loop.lastRoundAt = Date.now();
          }
          return progress;
        },
      };
      return { loop: loop as unknown as DispatchLoop, close: async () => undefined };
    },
    reportProgress: async () => undefined,
  };
  return { activities: createOwnershipActivities(deps), gates, shutdown };
}

const input = { topic: 't', partition: 0, owner: 'o1', epoch: 1, runMs: 60_000 };

describe('pollPartition and the lease run it belongs to', () => {
  it('ends with LeaseRunEnded once the instance holds a newer lease run, confirmed (a run that started before the answer to a join)', async () => {
    const membership = new Membership('L1', undefined);
    const { activities, gates } = setup(membership);
    const env = new MockActivityEnvironment();
    const run = env.run(activities.pollPartition, input);
    const outcome = run.then(
      () => 'returned',
      (e: unknown) => e,
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(gates[0]()).toBe(false);
    // The answer to the join arrives: the instance holds L2, confirmed by Temporal. L1 will never open again.
    membership.current = 'L2';
    membership.confirmed = 'L2';
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([
      outcome,
      new Promise((r) => (timer = setTimeout(() => r('still running after 3 s'), 3000))),
    ]);
    clearTimeout(timer);
    env.cancel();
    expect(ended).toBeInstanceOf(ApplicationFailure);
    expect((ended as ApplicationFailure).type).toBe(LEASE_RUN_ENDED);
    expect((ended as ApplicationFailure).nonRetryable).toBe(true);
  });

  it('goes on while its own lease run is the one confirmed, and while a newer one is not confirmed yet', async () => {
    const membership = new Membership('L1', 'L1');
    const { activities, gates, shutdown } = setup(membership);
    const env = new MockActivityEnvironment();
    let settled = false;
    const run = env.run(activities.pollPartition, input).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(gates[0]()).toBe(true);
    // Joined again (declared lost), the answer not yet confirmed: the run holds, shut, and does not end.
    membership.current = 'L2';
    membership.confirmed = undefined;
    await new Promise((r) => setTimeout(r, 1000));
    expect(settled).toBe(false);
    expect(gates[0]()).toBe(false);
    shutdown.abort();
    await expect(run).resolves.toMatchObject({ stoppedBy: 'shutdown' });
  });
});

describe("pollPartition at the instance's most partitions (EVENTMESH_DELIVERY_MAX_OWNED_PARTITIONS)", () => {
  it('says in the log, once, that the instance runs its most partitions, naming the setting, and again after it fell below', async () => {
    const { activities, shutdown } = setup(new Membership('L1', 'L1'), 2);
    const errors: string[] = [];
    const logger = {
      log: () => undefined,
      trace: () => undefined,
      debug: () => undefined,
      info: () => undefined,
      warn: () => undefined,
      error: (message: string) => void errors.push(message),
    };
    const start = (partition: number) => {
      const stop = new AbortController();
      const env = new MockActivityEnvironment({}, { logger });
      stop.signal.addEventListener('abort', () => env.cancel());
      const run = env.run(activities.pollPartition, { ...input, partition }).catch(() => undefined);
      return { run, stop: () => stop.abort() };
    };
    const first = start(0);
    await new Promise((r) => setTimeout(r, 50));
    expect(errors).toEqual([]);
    const second = start(1);
    await new Promise((r) => setTimeout(r, 50));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain('runs 2 partitions, its most (EVENTMESH_DELIVERY_MAX_OWNED_PARTITIONS)');
    second.stop();
    await second.run;
    const third = start(2);
    await new Promise((r) => setTimeout(r, 50));
    expect(errors).toHaveLength(2);
    shutdown.abort();
    await Promise.all([first.run, third.run]);
  });
});

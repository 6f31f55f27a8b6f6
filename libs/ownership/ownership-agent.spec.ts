import type { Client } from '@temporalio/client';
import { waitFor } from '../../test/support/wait-for';
import { OwnershipAgent } from './ownership-agent';

/** A Temporal client on which every workflow start answers a run, and the lease run always describes as running. */
const temporal = {
  workflow: {
    start: (_workflow: string, options: { workflowId: string }) =>
      Promise.resolve({ firstExecutionRunId: `${options.workflowId}-run` }),
    getHandle: (workflowId: string) => ({
      describe: () => Promise.resolve({ status: { name: 'RUNNING' }, runId: `${workflowId}-run` }),
      signal: () => Promise.resolve(),
    }),
  },
} as unknown as Client;

describe('OwnershipAgent with a liveness lock', () => {
  it('holds the loops while the lock is lost, and after it is taken again until Temporal confirms the lease anew', async () => {
    const lock = { held: true, acquiredAt: Date.now() - 1000 };
    const agent = new OwnershipAgent(temporal, {
      instanceId: 'i1',
      leaseTtlMs: 1000,
      partitionRunMs: 60_000,
      partitions: () => Promise.resolve(['t#0']),
      liveness: { confirmed: () => lock.held, acquiredAt: () => (lock.held ? lock.acquiredAt : 0) },
    });
    await agent.start();
    try {
      expect(agent.confirmed()).toBe(true);
      const run = agent.currentLeaseRun();
      expect(agent.confirmedFor(run)).toBe(true);

      lock.held = false;
      expect(agent.confirmedFor(run)).toBe(false);

      // Taken again by a new session: a peer may have ended the lease meanwhile, so only a later answer counts.
      lock.held = true;
      lock.acquiredAt = Date.now() + 1;
      expect(agent.confirmedFor(run)).toBe(false);
      await waitFor('a Temporal confirmation asked after the lock was taken again', () => agent.confirmedFor(run));
    } finally {
      await agent.stop();
    }
  });
});

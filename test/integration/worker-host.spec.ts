import { randomUUID } from 'node:crypto';
import type { Worker } from '@temporalio/worker';
import { WorkerHost } from '../../apps/worker/src/worker-host';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { closeDependencies, connectDependencies, Dependencies } from '@libs/runtime';
import { StreamHub } from '@libs/streams';
import { testConfig } from '../support/env';
import { terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

/**
 * The instance's Temporal worker host on the real servers: a worker that stops while the instance runs is
 * fatal, never silent (an instance that takes events and delivers none, with a healthy /health, is the worst
 * failure an operator can be handed).
 */
describe('WorkerHost (real Temporal, Postgres, Kafka)', () => {
  const instanceId = `worker-host-${randomUUID().slice(0, 8)}`;
  const config = testConfig({ EVENTMESH_INSTANCE_ID: instanceId });
  let deps: Dependencies;
  let host: WorkerHost | undefined;
  const fatal: string[] = [];

  beforeAll(async () => {
    deps = await connectDependencies(config, 'worker-host-spec');
    host = await WorkerHost.start(config, deps, (reason) => fatal.push(reason), new StreamHub(0));
  });

  afterAll(async () => {
    await host?.stop();
    await terminateWorkflows(deps.temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await closeDependencies(deps);
  });

  it("renews the dispatch run on the dispatch loops' own pool while every connection of the main pool is held", async () => {
    const renewedAt = async () => {
      const rows: { renewed_at: Date }[] = await deps.dispatchDb.query(
        'SELECT renewed_at FROM dispatch_runs WHERE instance_id = $1',
        [instanceId],
      );
      return rows[0]?.renewed_at.getTime();
    };
    await waitFor('the dispatch run claimed', renewedAt, { timeoutMs: 30000 });
    // The main pool's users (the gateway, presence, A2A, dead letters) took every connection and keep them.
    let letGo!: () => void;
    const held = new Promise<void>((r) => (letGo = r));
    const holders = Array.from({ length: config.postgres.poolSize }, () => deps.db.transaction(() => held));
    try {
      await waitFor(
        'the main pool exhausted',
        () =>
          (deps.db.driver as unknown as { master: { totalCount: number; idleCount: number } }).master.idleCount === 0 &&
          (deps.db.driver as unknown as { master: { totalCount: number } }).master.totalCount ===
            config.postgres.poolSize,
        { timeoutMs: 60000 },
      );
      const before = (await renewedAt())!;
      // Renewals come every fifth of the lease TTL: two of them within a lease TTL, the promise (they take two fifths of it: three fifths of margin for a loaded host).
      const after = await waitFor(
        'two renewals while the main pool is held',
        async () => {
          const at = (await renewedAt())!;
          return at > before + config.delivery.leaseTtlMs / 5 && at;
        },
        { timeoutMs: config.delivery.leaseTtlMs, intervalMs: 100 },
      );
      expect(after).toBeGreaterThan(before);
    } finally {
      letGo();
      await Promise.all(holders);
    }
  }, 120000);

  it('reports a worker that stopped while the instance runs as fatal', async () => {
    const workers = (host as unknown as { workers: Worker[] }).workers;
    workers[0].shutdown();
    const reasons = await waitFor('the instance to hear that its worker stopped', () => fatal.length > 0 && [...fatal]);
    expect(reasons[0]).toMatch(/Temporal worker .* stopped by itself/);
  });
});

import { dispatchActivityOf, dispatchEpochOf } from './cluster';
import { CI_LOAD, FaultRun } from './fault-run';
import { expectNothingLost } from './expect-run';
import { reportCase } from './report';
import {
  restoreServers,
  startKafka,
  startPostgres,
  startTemporal,
  stopKafka,
  stopPostgresFast,
  stopTemporal,
} from './servers';
import { waitFor } from '../support/wait-for';

/**
 * Clean stops and starts of the servers under load (docs/failure-matrix.md): the broker stopped with SIGTERM (a
 * controlled shutdown) and started, then Postgres stopped with `pg_ctl stop -m fast` (sessions ended, a
 * checkpoint) and started, in one run; and the Temporal dev server stopped with SIGTERM and started, in another.
 * Publishing and delivery resume after each (go on, for Temporal), and nothing acknowledged is lost.
 */
describe('faults: clean stop and start of the servers', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('Kafka SIGTERM and start, then Postgres stop -m fast and start, under load: nothing acknowledged is lost', async () => {
    run = new FaultRun({
      name: 'clean-restart',
      instances: [{}],
      subscribers: [{ transport: 'webhook' }, { transport: 'long-poll' }],
      ...CI_LOAD,
    });
    try {
      await run.start();
      await run.acknowledgedMore(100);
      await stopKafka();
      await startKafka();
      await run.acknowledgedMore(100, 60000);
      expect(await run.delivered(60000)).toBe(true);

      await stopPostgresFast();
      const downAt = Date.now();
      // Publishing does not need Postgres: it goes on while the server is down.
      await run.acknowledgedMore(50, 60000);
      await waitFor('3 s of Postgres down', () => Date.now() - downAt >= 3000, { timeoutMs: 60000 });
      await startPostgres();
      await run.acknowledgedMore(100, 60000);
      const result = await run.finish(60000);
      reportCase('Kafka SIGTERM + start, then Postgres stop -m fast, 3 s down, start; 1 instance, 100/s', result);
      expectNothingLost(result);
    } finally {
      await restoreServers();
    }
  }, 390000);

  it('Temporal SIGTERM and start under load: delivery goes on while it is down, the dispatch activity heartbeats again, nothing acknowledged is lost', async () => {
    const env = { EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000' };
    run = new FaultRun({
      name: 'temporal-restart',
      instances: [{}],
      subscribers: [{ transport: 'webhook' }, { transport: 'long-poll' }],
      ...CI_LOAD,
      env,
    });
    try {
      await run.start();
      await run.acknowledgedMore(100);
      const instanceId = run.instances[0].id;
      const epochBefore = await dispatchEpochOf(env, instanceId);
      const stopping = Date.now();
      await stopTemporal();
      const stoppedAt = Date.now();
      // Publishing and delivery need no Temporal: while it is down, 2 s of events are published and delivered.
      await run.acknowledgedMore(200, 60000);
      const deliveredWhileDown = await run.delivered(60000);
      const deliveredDownMs = Date.now() - stoppedAt;
      await startTemporal();
      const backAt = Date.now();
      // Back up, the server sees the dispatch activity heartbeat within a lease TTL again (the same attempt, or a new
      // one that claimed the next epoch), without a restart of the instance.
      const activity = await waitFor(
        'a dispatch activity heartbeating within the TTL',
        async () => {
          const a = await dispatchActivityOf(env, instanceId);
          return (
            a?.state === 'STARTED' &&
            a.heartbeatAgeMs !== undefined &&
            a.heartbeatAgeMs < 4000 && { ...a, afterStartMs: Date.now() - backAt }
          );
        },
        { timeoutMs: 30000, intervalMs: 500 },
      ).catch((e: Error) => e.message);
      await run.acknowledgedMore(100, 30000);
      const epochAfter = await dispatchEpochOf(env, instanceId);
      const result = await run.finish(30000);
      reportCase(
        'Temporal dev server SIGTERM, start; 1 instance, 100/s',
        result,
        `stop took ${stoppedAt - stopping} ms; down ${backAt - stoppedAt} ms; everything acknowledged delivered while down: ${deliveredWhileDown} (${deliveredDownMs} ms after the stop); dispatch epochs ${epochBefore} -> ${epochAfter}; activity ${JSON.stringify(activity)}`,
      );
      expect(deliveredWhileDown).toBe(true);
      expect(activity).toMatchObject({ state: 'STARTED' });
      expect(run.instances[0].process!.child.exitCode).toBeNull();
      expectNothingLost(result, { order: false });
    } finally {
      await restoreServers();
    }
  }, 300000);
});

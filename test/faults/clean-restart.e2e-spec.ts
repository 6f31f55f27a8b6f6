import { CI_LOAD, FaultRun } from './fault-run';
import { expectNothingLost } from './expect-run';
import { reportCase } from './report';
import { restoreServers, startKafka, startPostgres, stopKafka, stopPostgresFast } from './servers';
import { waitFor } from '../support/wait-for';

/**
 * Clean stops and starts of the servers under load (docs/failure-matrix.md): the broker stopped with SIGTERM (a
 * controlled shutdown) and started, then Postgres stopped with `pg_ctl stop -m fast` (sessions ended, a
 * checkpoint) and started, in one run. Publishing and delivery resume after each, and nothing acknowledged is lost.
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
      await run.acknowledgedMore(50, 20000);
      await waitFor('3 s of Postgres down', () => Date.now() - downAt >= 3000, { timeoutMs: 10000 });
      await startPostgres();
      await run.acknowledgedMore(100, 60000);
      const result = await run.finish(60000);
      reportCase('Kafka SIGTERM + start, then Postgres stop -m fast, 3 s down, start; 1 instance, 100/s', result);
      expectNothingLost(result);
    } finally {
      await restoreServers();
    }
  }, 300000);
});

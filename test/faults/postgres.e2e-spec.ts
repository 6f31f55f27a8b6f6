import { dispatchEpochOf } from './cluster';
import { CI_LOAD, FaultRun } from './fault-run';
import { expectNothingLost } from './expect-run';
import { reportCase } from './report';
import { restoreServers, startPostgres, stopPostgresImmediately } from './servers';
import { waitFor } from '../support/wait-for';

/**
 * Postgres faults under load (docs/failure-matrix.md): the server stopped at once (`pg_ctl stop -m immediate`,
 * a crash) and started again, a slow link (2 s per chunk through the fault proxy), and the link cut, reset and
 * held half-open. Delivery may pause; it resumes from the committed offsets, and nothing acknowledged is lost.
 */
/** One instance with its Postgres link through the fault proxy, a webhook and a WebSocket subscriber, the CI load. */
const proxiedRun = (name: string, env: Record<string, string>) =>
  new FaultRun({
    name,
    instances: [{ proxyPostgres: true }],
    subscribers: [{ transport: 'webhook' }, { transport: 'websocket' }],
    ...CI_LOAD,
    env,
  });

/** Starts `run` and waits for its first 100 acknowledged events: its proxy, instance and dispatch epoch then. */
async function underLoad(run: FaultRun, env: Record<string, string>) {
  await run.start();
  await run.acknowledgedMore(100);
  const instanceId = run.instances[0].id;
  return { proxy: run.instances[0].postgres!, instanceId, epoch: await dispatchEpochOf(env, instanceId) };
}

describe('faults: Postgres', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('immediate stop and start under load: delivery resumes from committed offsets, nothing acknowledged is lost', async () => {
    run = new FaultRun({
      name: 'pg-crash',
      instances: [{}],
      subscribers: [{ transport: 'webhook' }, { transport: 'sse' }],
      ...CI_LOAD,
    });
    try {
      await run.start();
      await run.acknowledgedMore(100);
      await stopPostgresImmediately();
      const downAt = Date.now();
      // Publishing does not need Postgres: it goes on while the server is down.
      await run.acknowledgedMore(50, 60000);
      await waitFor('5 s of outage', () => Date.now() - downAt >= 5000, { timeoutMs: 60000 });
      await startPostgres();
      await run.acknowledgedMore(100, 60000);
      const result = await run.finish(60000);
      reportCase('Postgres pg_ctl stop -m immediate, 5 s down, start; 1 instance, 100/s', result);
      expectNothingLost(result);
    } finally {
      await restoreServers();
    }
  }, 330000);

  it('slow (2 s per chunk through the proxy) for 10 s under load: nothing acknowledged is lost, delivery catches up', async () => {
    run = new FaultRun({
      name: 'pg-slow',
      instances: [{ proxyPostgres: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'websocket' }],
      ...CI_LOAD,
    });
    await run.start();
    await run.acknowledgedMore(100);
    const proxy = run.instances[0].postgres!;
    proxy.latency(2000);
    const slowAt = Date.now();
    await run.acknowledgedMore(200, 30000);
    await waitFor('10 s of slowness', () => Date.now() - slowAt >= 10000, { timeoutMs: 60000 });
    proxy.heal();
    await run.acknowledgedMore(100, 30000);
    const result = await run.finish(60000);
    reportCase('Postgres link +2 s per chunk for 10 s (proxy); 1 instance, 100/s', result);
    expectNothingLost(result);
  }, 240000);
});

describe('faults: Postgres link', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('cut 4 s, reset, half-open hold 6 s (one after another, proxy) under load: delivery resumes after each, nothing acknowledged is lost', async () => {
    const env = { EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000' };
    run = proxiedRun('pg-link', env);
    const { proxy, instanceId, epoch } = await underLoad(run, env);
    const epochs: number[] = [epoch];
    const resumedMs: Record<string, number> = {};
    /**
     * After a heal: everything acknowledged so far reaches every subscription. The deadline means "hung": about 10x
     * the slowest resume seen on CI (12 s after the hold; a CI host shared with other lanes passed 30 s once). How
     * soon it resumes is the row's figure.
     */
    const resumes = async (fault: string) => {
      const healedAt = Date.now();
      expect(await run!.delivered(120000)).toBe(true);
      resumedMs[fault] = Date.now() - healedAt;
      epochs.push(await dispatchEpochOf(env, instanceId));
    };

    proxy.cut();
    const cutAt = Date.now();
    await waitFor('4 s of cut', () => Date.now() - cutAt >= 4000, { timeoutMs: 60000 });
    proxy.heal();
    await resumes('cut');

    proxy.reset();
    await resumes('reset');

    // Longer than the lease TTL (4 s): a loop stuck on a held statement withholds its heartbeat.
    proxy.hold();
    const heldAt = Date.now();
    await waitFor('6 s of hold', () => Date.now() - heldAt >= 6000, { timeoutMs: 60000 });
    proxy.heal();
    await resumes('hold');

    await run.acknowledgedMore(100, 30000);
    const result = await run.finish(60000);
    reportCase(
      'Postgres link cut 4 s, reset, hold 6 s (proxy, lease TTL 4 s); 1 instance, 100/s',
      result,
      `delivered all acknowledged within ${JSON.stringify(resumedMs)} ms of each heal; dispatch epochs ${epochs.join(' -> ')}`,
    );
    expectNothingLost(result);
  }, 600000);
});

describe('faults: Postgres link black-holed', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('the open connections black-holed for good, twice (no RST; new connections work) under load: delivery resumes within 60 s each time (about 10 s as a rule), no query waits on a dead link for good, nothing acknowledged is lost', async () => {
    // Small pools (the main one and the dispatch loops' own): what waits on a dead link for good is a connection the
    // runtime never gets back. Leak detection on: a slow recovery prints who held the connections, and with what.
    const env = {
      EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000',
      EVENTMESH_POSTGRES_QUERY_TIMEOUT_MS: '8000',
      EVENTMESH_POSTGRES_POOL_SIZE: '3',
      EVENTMESH_POSTGRES_DISPATCH_POOL_SIZE: '3',
      EVENTMESH_POSTGRES_LEAK_DETECTION_THRESHOLD_MS: '3000',
    };
    run = proxiedRun('pg-strand', env);
    const { proxy, instanceId, epoch } = await underLoad(run, env);
    const epochs = [epoch];
    const notes: string[] = [];
    const slow: { round: number; strandedAt: number; resumedMs: number }[] = [];
    for (const round of [1, 2]) {
      // The statements in flight and the pool's idle connections are lost behind the partition: only a deadline
      // on each query frees what waits on them (the proxy's TCP stack answers, as a half-open peer's does until
      // keepalive gives up).
      proxy.strand();
      const strandedAt = Date.now();
      await run.acknowledgedMore(100, 60000);
      // About 10 s as a rule (the query deadline, a new dispatch attempt, the catch-up). Before the dispatch loops had
      // a pool of their own and idle connections were probed before use, 2 of about 10 CI runs and 2 local runs took
      // more than 30 s; since, one CI run took 30.2 s (docs/failure-matrix.md), so 60 s are allowed. The instance's
      // warnings (leak reports included) are printed past 20 s.
      const resumed = await run.delivered(Math.max(0, 60000 - (Date.now() - strandedAt)));
      const resumedMs = Date.now() - strandedAt;
      notes.push(
        `strand ${round}: ${resumed ? `delivered all acknowledged within ${resumedMs} ms` : 'NOT delivered within 60 s'}`,
      );
      if (resumedMs > 20000) slow.push({ round, strandedAt, resumedMs });
      epochs.push(await dispatchEpochOf(env, instanceId).catch(() => NaN));
      // The runtime lets go of every dead connection: a query on one times out (8 s) and its connection is
      // dropped; an idle one leaves the pool after its idle timeout (10 s). Those are the promise: 25 s leaves 15 s of
      // margin over the idle timeout for a loaded 2-core host.
      const released = await waitFor('no client connection left on the dead links', () => proxy.strandedOpen === 0, {
        timeoutMs: 25000,
        intervalMs: 250,
      }).then(
        () => true,
        () => false,
      );
      notes.push(
        `strand ${round}: ${released ? `dead links released ${Date.now() - strandedAt} ms after` : `${proxy.strandedOpen} dead links still held after 25 s`}`,
      );
      if (!resumed || !released) break;
    }
    const result = await run.finish(30000);
    // What the instance logged through a slow recovery (read after the run: its output is complete only then).
    for (const { round, strandedAt, resumedMs } of slow) {
      process.stdout.write(
        `strand ${round} took ${resumedMs} ms; the instance's warnings since the black hole:\n${run.instances[0].warningLines(strandedAt).join('\n')}\n`,
      );
    }
    reportCase(
      'Postgres link: open connections black-holed for good, twice; new ones pass (proxy, pool 3, lease TTL 4 s, query timeout 8 s); 1 instance, 100/s',
      result,
      `${notes.join('; ')}; dispatch epochs ${epochs.join(' -> ')}`,
    );
    expect(notes.filter((n) => /NOT|still held/.test(n))).toEqual([]);
    expect(run.instances[0].process!.child.exitCode).toBeNull();
    expectNothingLost(result);
  }, 360000);
});

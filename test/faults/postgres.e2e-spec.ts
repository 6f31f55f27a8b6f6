import { dispatchEpochOf } from './cluster';
import { FaultRun } from './fault-run';
import { expectNothingLost } from './expect-run';
import { reportCase } from './report';
import { restoreServers, startPostgres, stopPostgresImmediately } from './servers';
import { waitFor } from '../support/wait-for';

/**
 * Postgres faults under load (docs/failure-matrix.md): the server stopped at once (`pg_ctl stop -m immediate`,
 * a crash) and started again, a slow link (2 s per chunk through the fault proxy), and the link cut, reset and
 * held half-open. Delivery may pause; it resumes from the committed offsets, and nothing acknowledged is lost.
 */
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
      publishers: 4,
      ratePerSecond: 100,
      attemptTimeoutMs: 5000,
    });
    try {
      await run.start();
      await run.acknowledgedMore(100);
      await stopPostgresImmediately();
      const downAt = Date.now();
      // Publishing does not need Postgres: it goes on while the server is down.
      await run.acknowledgedMore(50, 20000);
      await waitFor('5 s of outage', () => Date.now() - downAt >= 5000, { timeoutMs: 10000 });
      await startPostgres();
      await run.acknowledgedMore(100, 60000);
      const result = await run.finish(60000);
      reportCase('Postgres pg_ctl stop -m immediate, 5 s down, start; 1 instance, 100/s', result);
      expectNothingLost(result);
    } finally {
      await restoreServers();
    }
  }, 240000);

  it('slow (2 s per chunk through the proxy) for 10 s under load: nothing acknowledged is lost, delivery catches up', async () => {
    run = new FaultRun({
      name: 'pg-slow',
      instances: [{ proxyPostgres: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'websocket' }],
      publishers: 4,
      ratePerSecond: 100,
      attemptTimeoutMs: 5000,
    });
    await run.start();
    await run.acknowledgedMore(100);
    const proxy = run.instances[0].postgres!;
    proxy.latency(2000);
    const slowAt = Date.now();
    await run.acknowledgedMore(200, 30000);
    await waitFor('10 s of slowness', () => Date.now() - slowAt >= 10000, { timeoutMs: 20000 });
    proxy.heal();
    await run.acknowledgedMore(100, 30000);
    const result = await run.finish(60000);
    reportCase('Postgres link +2 s per chunk for 10 s (proxy); 1 instance, 100/s', result);
    expectNothingLost(result);
  }, 180000);
});

describe('faults: Postgres link', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('cut 4 s, reset, half-open hold 6 s (one after another, proxy) under load: delivery resumes after each, nothing acknowledged is lost', async () => {
    const env = { EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000' };
    run = new FaultRun({
      name: 'pg-link',
      instances: [{ proxyPostgres: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'websocket' }],
      publishers: 4,
      ratePerSecond: 100,
      attemptTimeoutMs: 5000,
      env,
    });
    await run.start();
    await run.acknowledgedMore(100);
    const proxy = run.instances[0].postgres!;
    const instanceId = run.instances[0].id;
    const epochs: number[] = [await dispatchEpochOf(env, instanceId)];
    const resumedMs: Record<string, number> = {};
    /** After a heal: everything acknowledged so far reaches every subscription within 30 s. */
    const resumes = async (fault: string) => {
      const healedAt = Date.now();
      expect(await run!.delivered(30000)).toBe(true);
      resumedMs[fault] = Date.now() - healedAt;
      epochs.push(await dispatchEpochOf(env, instanceId));
    };

    proxy.cut();
    const cutAt = Date.now();
    await waitFor('4 s of cut', () => Date.now() - cutAt >= 4000, { timeoutMs: 10000 });
    proxy.heal();
    await resumes('cut');

    proxy.reset();
    await resumes('reset');

    // Longer than the lease TTL (4 s): a loop stuck on a held statement withholds its heartbeat.
    proxy.hold();
    const heldAt = Date.now();
    await waitFor('6 s of hold', () => Date.now() - heldAt >= 6000, { timeoutMs: 10000 });
    proxy.heal();
    await resumes('hold');

    await run.acknowledgedMore(100, 30000);
    const result = await run.finish(60000);
    reportCase('Postgres link cut 4 s, reset, hold 6 s (proxy, lease TTL 4 s); 1 instance, 100/s', result, `delivered all acknowledged within ${JSON.stringify(resumedMs)} ms of each heal; dispatch epochs ${epochs.join(' -> ')}`);
    expectNothingLost(result);
  }, 180000);
});

describe('faults: Postgres link black-holed', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('every open connection black-holed for good (no RST; new connections work) under load: delivery resumes within 30 s, nothing acknowledged is lost', async () => {
    const env = { EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000', EVENTMESH_POSTGRES_QUERY_TIMEOUT_MS: '8000' };
    run = new FaultRun({
      name: 'pg-strand',
      instances: [{ proxyPostgres: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'websocket' }],
      publishers: 4,
      ratePerSecond: 100,
      attemptTimeoutMs: 5000,
      env,
    });
    await run.start();
    await run.acknowledgedMore(100);
    const instanceId = run.instances[0].id;
    const epochBefore = await dispatchEpochOf(env, instanceId);
    // The statements in flight and the pool's idle connections are lost behind the partition; only a client-side
    // deadline on each query can free what waits on them (the proxy's TCP stack answers, as a half-open peer's
    // would until keepalive gives up, which takes minutes).
    run.instances[0].postgres!.strand();
    const strandedAt = Date.now();
    await run.acknowledgedMore(100, 20000);
    const resumed = await run.delivered(30000);
    const resumedMs = Date.now() - strandedAt;
    const epochAfter = await dispatchEpochOf(env, instanceId);
    await run.acknowledgedMore(100, 30000);
    const result = await run.finish(30000);
    reportCase(
      'Postgres link: every open connection black-holed for good, new ones pass (proxy, lease TTL 4 s, query timeout 8 s); 1 instance, 100/s',
      result,
      `delivered all acknowledged ${resumed ? `within ${resumedMs} ms of the black hole` : 'NOT within 30 s'}; dispatch epochs ${epochBefore} -> ${epochAfter}`,
    );
    expect(resumed).toBe(true);
    expect(run.instances[0].process!.child.exitCode).toBeNull();
    expectNothingLost(result);
  }, 180000);
});

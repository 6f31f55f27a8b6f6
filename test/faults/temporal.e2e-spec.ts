import { dispatchActivityOf, dispatchEpochOf } from './cluster';
import type { FaultProxy } from './fault-proxy';
import { CI_LOAD, FaultRun } from './fault-run';
import { expectNothingLost } from './expect-run';
import { reportCase } from './report';
import { killTemporal, restoreServers, startTemporal } from './servers';
import { waitFor } from '../support/wait-for';

/**
 * Temporal faults under load (docs/failure-matrix.md): the link between the instance and the Temporal frontend
 * cut for longer than the dispatch activity's heartbeat timeout, then healed; and the Temporal server killed
 * (`kill -9`) and started again. Publishing does not need Temporal; delivery may pause or be redone, it resumes
 * without a restart of the instance, and nothing acknowledged is lost.
 */
describe('faults: Temporal', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('cut past the heartbeat timeout, then healed: nothing acknowledged is lost', async () => {
    run = new FaultRun({
      name: 'temporal-cut',
      instances: [{ proxyTemporal: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'long-poll' }],
      ...CI_LOAD,
      env: { EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000' },
    });
    await run.start();
    await run.acknowledgedMore(100);
    const proxy = run.instances[0].temporal!;
    proxy.cut();
    const cutAt = Date.now();
    await run.acknowledgedMore(200, 30000);
    await waitFor('10 s of cut (2.5 heartbeat timeouts)', () => Date.now() - cutAt >= 10000, { timeoutMs: 60000 });
    proxy.heal();
    await run.acknowledgedMore(100, 30000);
    const result = await run.finish(60000);
    reportCase('Temporal link cut 10 s (TTL 4 s, proxy); 1 instance, 100/s', result);
    expectNothingLost(result, { order: false });
  }, 240000);

  it('server kill -9 and start under load: the timed-out dispatch activity runs again on the same worker, delivery resumes, nothing acknowledged is lost', async () => {
    const env = { EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000' };
    run = new FaultRun({
      name: 'temporal-kill',
      instances: [{ proxyTemporal: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'long-poll' }],
      ...CI_LOAD,
      env,
    });
    try {
      await run.start();
      await run.acknowledgedMore(100);
      const instanceId = run.instances[0].id;
      const proxy = run.instances[0].temporal!;
      const epochBefore = await dispatchEpochOf(env, instanceId);
      // The instance's link stays cut until the restarted server has timed the running attempt out (past its
      // heartbeat timeout, the lease TTL): without it, a heartbeat retried by the worker may reach the server
      // before its timers and keep the old attempt alive, and the retry this case is about would not happen.
      proxy.cut();
      await killTemporal();
      const killedAt = Date.now();
      await run.acknowledgedMore(100, 60000);
      await waitFor('6 s of Temporal down', () => Date.now() - killedAt >= 6000, { timeoutMs: 60000 });
      await startTemporal();
      const backAt = Date.now();
      const timedOut = await waitFor(
        'the server to time the running attempt out',
        async () => {
          const activity = await dispatchActivityOf(env, instanceId);
          return (
            (!activity || activity.attempt > 1) && {
              activity: activity ?? 'none pending',
              afterMs: Date.now() - backAt,
            }
          );
        },
        { timeoutMs: 60000, intervalMs: 500 },
      );
      proxy.heal();
      const healedAt = Date.now();
      // The worker polls again, the workflow's retry of the activity runs on it, and its attempt claims the next
      // epoch: no restart of the instance.
      const epochAfter = await waitFor(
        'a new dispatch attempt on the same worker',
        async () => {
          const epoch = await dispatchEpochOf(env, instanceId);
          return epoch > epochBefore && epoch;
        },
        { timeoutMs: 60000, intervalMs: 500 },
      );
      const reclaimedMs = Date.now() - healedAt;
      // That attempt, as the server sees it.
      const retried = await waitFor(
        'the new attempt running',
        async () => {
          const a = await dispatchActivityOf(env, instanceId);
          return a?.state === 'STARTED' && a;
        },
        { timeoutMs: 30000, intervalMs: 500 },
      );
      await run.acknowledgedMore(100, 30000);
      // Alive at the end, by the server's records rather than a bound on this host's clock: the server records a
      // heartbeat of it after the load (the SDK sends one every 0.8 heartbeat timeouts, 3.2 s; 40 s means "hung"),
      // and it is still the same attempt (one that missed its heartbeat timeout, the lease TTL, would have been
      // timed out by the server and retried as the next attempt).
      const loadedAt = Date.now();
      const activity = await waitFor(
        'a heartbeat of the new attempt after the load',
        async () => {
          const a = await dispatchActivityOf(env, instanceId);
          return a?.state === 'STARTED' && (a.heartbeatAt ?? 0) > loadedAt && a;
        },
        { timeoutMs: 40000, intervalMs: 500 },
      );
      const result = await run.finish(60000);
      reportCase(
        'Temporal server kill -9, 6 s down, start; instance link held until the attempt timed out (TTL 4 s); 1 instance, 100/s',
        result,
        `down ${backAt - killedAt} ms; attempt timed out ${JSON.stringify(timedOut)}; new attempt ${reclaimedMs} ms after the link healed (epoch ${epochBefore} -> ${epochAfter}); then ${JSON.stringify(activity)}`,
      );
      expect(run.instances[0].process!.child.exitCode).toBeNull();
      expect(activity.attempt).toBe(retried.attempt);
      expectNothingLost(result, { order: false });
    } finally {
      await restoreServers();
    }
  }, 330000);
});

describe('faults: Temporal link slow, half-open and reset', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  /**
   * `fault` for `windowMs` under load, then heal; everything acknowledged must be delivered within `deliverWithinMs`
   * of the heal, and the dispatch activity heartbeating again within `recoverWithinMs`.
   */
  const linkCase = async (
    name: string,
    fault: (proxy: FaultProxy) => void,
    label: string,
    {
      windowMs = 10000,
      recoverWithinMs = 30000,
      deliverWithinMs = recoverWithinMs,
    }: { windowMs?: number; recoverWithinMs?: number; deliverWithinMs?: number } = {},
  ) => {
    const env = { EVENTMESH_DELIVERY_LEASE_TTL_MS: '4000' };
    run = new FaultRun({
      name,
      instances: [{ proxyTemporal: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'long-poll' }],
      ...CI_LOAD,
      env,
    });
    await run.start();
    await run.acknowledgedMore(100);
    const instanceId = run.instances[0].id;
    const proxy = run.instances[0].temporal!;
    const epochBefore = await dispatchEpochOf(env, instanceId);
    fault(proxy);
    const faultAt = Date.now();
    // Publishing does not touch Temporal: it goes on.
    await run.acknowledgedMore(200, 60000);
    await waitFor('the fault window', () => Date.now() - faultAt >= windowMs, { timeoutMs: windowMs + 10000 });
    // What each subscription lacked of the acknowledged events when the window ended: which transports stalled.
    const acknowledged = run.acknowledgedIds();
    const lacking = run.subscribers
      .map((sub) => `${sub.name} ${acknowledged.filter((id) => !sub.seen.has(id)).length}`)
      .join(', ');
    proxy.heal();
    const healedAt = Date.now();
    const faultMs = healedAt - faultAt;
    const resumed = await run.delivered(deliverWithinMs);
    const resumedMs = Date.now() - healedAt;
    await run.acknowledgedMore(100, 30000);
    // Recovered by itself: the dispatch activity the server sees running heartbeats again within a lease TTL.
    const activity = await waitFor(
      'a dispatch activity heartbeating within the TTL',
      async () => {
        const a = await dispatchActivityOf(env, instanceId);
        return (
          a?.state === 'STARTED' &&
          a.heartbeatAgeMs !== undefined &&
          a.heartbeatAgeMs < 4000 && { ...a, afterHealMs: Date.now() - healedAt }
        );
      },
      { timeoutMs: recoverWithinMs, intervalMs: 500 },
    ).catch((e: Error) => e.message);
    const epochAfter = await dispatchEpochOf(env, instanceId);
    const result = await run.finish(30000);
    reportCase(
      label,
      result,
      `fault ${faultMs} ms; lacking at its end (of ${acknowledged.length}): ${lacking}; delivered all acknowledged ${resumed ? `${resumedMs} ms after the heal` : `NOT within ${deliverWithinMs} ms of the heal`}; dispatch epochs ${epochBefore} -> ${epochAfter}; activity ${JSON.stringify(activity)}`,
    );
    expect(resumed).toBe(true);
    expect(activity).toMatchObject({ state: 'STARTED' });
    expect(run.instances[0].process!.child.exitCode).toBeNull();
    expectNothingLost(result, { order: false });
  };

  it('slow (+2 s per chunk each way) for 10 s under load: delivery goes on or resumes after the heal, nothing acknowledged is lost', async () => {
    await linkCase(
      'temporal-slow',
      (proxy) => proxy.latency(2000),
      'Temporal link +2 s per chunk each way for 10 s (TTL 4 s, proxy); 1 instance, 100/s',
    );
  }, 240000);

  it('half-open (held: nothing forwarded, nothing closed) for 10 s under load: delivery goes on or resumes after the heal, nothing acknowledged is lost', async () => {
    await linkCase(
      'temporal-hold',
      (proxy) => proxy.hold(),
      'Temporal link held half-open 10 s (TTL 4 s, proxy); 1 instance, 100/s',
    );
  }, 180000);

  // A reset is over at once: the worker's calls fail, it opens a new connection (new ones pass) and heartbeats
  // again; the window is the 3 s after it.
  it('reset (TCP RST on the open connections) under load: delivery goes on, the dispatch activity heartbeats again, nothing acknowledged is lost', async () => {
    await linkCase(
      'temporal-reset',
      (proxy) => proxy.reset(),
      'Temporal link: open connections reset (RST), new ones pass (TTL 4 s, proxy); 1 instance, 100/s',
      { windowMs: 3000, deliverWithinMs: 5000, recoverWithinMs: 15000 },
    );
  }, 120000);

  // Delivery needs no Temporal: it goes on through the black hole, and everything acknowledged is delivered within
  // 5 s of the window's end (heal is a no-op for a strand). The dispatch activity itself is back only when the
  // Temporal SDK's HTTP/2 keepalive (a ping every 30 s, 15 s to answer) has dropped the dead connection: about a
  // minute, 90 s allowed after the 10 s window.
  it('black-holed for good (the open connections; new ones pass) under load: delivery goes on, the worker leaves the dead link by itself, nothing acknowledged is lost', async () => {
    await linkCase(
      'temporal-strand',
      (proxy) => proxy.strand(),
      'Temporal link: open connections black-holed for good, new ones pass (TTL 4 s, proxy); 1 instance, 100/s',
      { deliverWithinMs: 5000, recoverWithinMs: 90000 },
    );
  }, 240000);
});

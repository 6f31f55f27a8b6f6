import { createServer } from 'node:net';
import { parsePrometheusText, sampleOf } from '../../test/support/prometheus-text';
import { RuntimeMetrics } from './runtime-metrics';

/** A loopback port nobody listens on (taken, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('RuntimeMetrics', () => {
  const scrape = async (m: RuntimeMetrics) => parsePrometheusText(await m.scrape());

  it('names attempts by transport and outcome, and times only acknowledged ones with a record time', async () => {
    const m = new RuntimeMetrics();
    m.attempted('HTTP', { ok: true }, Date.now() - 250);
    m.attempted('HTTP', { ok: false });
    m.attempted('HTTP', { ok: false, rejected: true });
    m.attempted('HTTP', { ok: false, gone: true });
    m.attempted('STREAM', { ok: false, notAttempted: true });
    m.attempted('STREAM', { ok: true });
    const s = await scrape(m);
    const attempts = (transport: string, outcome: string) =>
      sampleOf(s, 'eventmesh_delivery_attempts_total', { transport, outcome });
    expect([
      attempts('webhook', 'delivered'),
      attempts('webhook', 'failed'),
      attempts('webhook', 'rejected'),
      attempts('webhook', 'gone'),
    ]).toEqual([1, 1, 1, 1]);
    expect([attempts('stream', 'not_attempted'), attempts('stream', 'delivered')]).toEqual([1, 1]);
    expect(sampleOf(s, 'eventmesh_delivery_publish_to_ack_seconds_count', { transport: 'webhook' })).toBe(1);
    expect(sampleOf(s, 'eventmesh_delivery_publish_to_ack_seconds_bucket', { transport: 'webhook', le: '0.1' })).toBe(
      0,
    );
    expect(sampleOf(s, 'eventmesh_delivery_publish_to_ack_seconds_bucket', { transport: 'webhook', le: '0.5' })).toBe(
      1,
    );
    expect(
      s.samples.filter(
        (x) => x.name === 'eventmesh_delivery_publish_to_ack_seconds_count' && x.labels.transport === 'stream',
      ),
    ).toEqual([]);
  });

  it('reads the running loops at each scrape: lanes that closed leave the lag series', async () => {
    const m = new RuntimeMetrics();
    let lanes = [
      { subscriptionId: 's1', topic: 't', partition: 0, lag: 5 },
      { subscriptionId: 's2', topic: 't', partition: 1, lag: 0 },
    ];
    m.sources.loops = {
      values: () => [
        {
          lastRoundAt: Date.now(),
          laneLags: () => lanes,
          breakerStates: () => [{ subscriptionId: 's1', state: 'OPEN' as const }],
        },
      ],
    };
    let s = await scrape(m);
    expect(sampleOf(s, 'eventmesh_delivery_lag_events', { subscription: 's1', partition: '0' })).toBe(5);
    expect(sampleOf(s, 'eventmesh_delivery_circuit_state', { subscription: 's1' })).toBe(2);
    expect(sampleOf(s, 'eventmesh_dispatch_loops')).toBe(1);
    lanes = [lanes[0]];
    s = await scrape(m);
    expect(
      s.samples.filter((x) => x.name === 'eventmesh_delivery_lag_events').map((x) => x.labels.subscription),
    ).toEqual(['s1']);
  });

  it('counts a failed read of the stored counts once, keeps the last values read, and still answers', async () => {
    const m = new RuntimeMetrics(0);
    let reads = 0;
    m.readStoredCounts(() =>
      ++reads === 1
        ? Promise.resolve({
            parked: 3,
            deadLetters: 7,
            pushDeadLetters: 2,
            rejectedWrites: { partitionLeases: 2, dispatchRuns: 1 },
            partitions: [{ topic: 't', partition: 0, epoch: 4, owned: true }],
          })
        : Promise.reject(new Error('connection refused')),
    );
    const first = await scrape(m);
    expect(reads).toBe(1);
    expect([
      sampleOf(first, 'eventmesh_delivery_retry_parked'),
      sampleOf(first, 'eventmesh_delivery_dead_letters'),
      sampleOf(first, 'eventmesh_a2a_push_dead_letters'),
    ]).toEqual([3, 7, 2]);
    expect(sampleOf(first, 'eventmesh_ownership_rejected_writes_total', { table: 'partition_leases' })).toBe(2);
    expect(sampleOf(first, 'eventmesh_ownership_partition_epoch', { topic: 't', partition: '0', owned: 'true' })).toBe(
      4,
    );
    const failed = await scrape(m);
    expect(reads).toBe(2);
    expect(sampleOf(failed, 'eventmesh_metrics_source_errors_total', { source: 'postgres' })).toBe(1);
    expect(sampleOf(failed, 'eventmesh_delivery_dead_letters')).toBe(7);
    expect(sampleOf(failed, 'eventmesh_ownership_rejected_writes_total', { table: 'dispatch_runs' })).toBe(1);
  });

  it("answers without the Temporal series when the core's exporter does not answer, and counts it", async () => {
    const m = new RuntimeMetrics();
    m.setTemporalAddress(`127.0.0.1:${await closedPort()}`);
    const s = await scrape(m);
    expect(sampleOf(s, 'eventmesh_metrics_source_errors_total', { source: 'temporal' })).toBe(1);
    expect([...s.families.keys()].some((f) => f.startsWith('temporal_'))).toBe(false);
    expect(s.families.get('eventmesh_publish_requests_total')).toBe('counter');
  });
});

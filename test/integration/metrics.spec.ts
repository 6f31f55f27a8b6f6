import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import { ErrorCode } from '@libs/errors';
import {
  ACTIONS,
  DEFAULT_TENANT,
  GateContext,
  GateFilter,
  GateRefusal,
  LoggingAuditSink,
  SecurityGate,
  Verdict,
} from '@libs/security';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { testConfig, uniqueTopic } from '../support/env';
import { Exposition, parsePrometheusText, sampleOf, seriesNamesOf } from '../support/prometheus-text';
import { metricNamesOf } from '../support/promql';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

/** The answer's status, its body read (an answer left unread holds its connection open, and the gateway's close with it). */
async function statusOf(answer: Promise<Response>): Promise<number> {
  const response = await answer;
  await response.arrayBuffer();
  return response.status;
}

/** Admits every request but those carrying `x-test-deny` (refused by the `acl` filter, reason `test`). */
class DenyMarked implements GateFilter {
  readonly name = 'acl';
  check({ request }: GateContext): Verdict {
    if (request.headers['x-test-deny'])
      return { allow: false, refusal: new GateRefusal(ErrorCode.Forbidden, 'denied by the test gate', 'test') };
    return { allow: true };
  }
}

/**
 * GET /metrics after known traffic, on a real instance (gateway and worker) against the real servers: N events
 * published and delivered to a webhook sink, one publish refused as invalid, one denied by the gate. The scrape is
 * read by a strict Prometheus text parser (test/support/prometheus-text.ts) and holds the exact counts; every
 * series the Grafana dashboard queries is in it, the Temporal core's included.
 */
describe('GET /metrics (real servers)', () => {
  const N = 12;
  const topic = uniqueTopic('metrics');
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `metrics-${randomUUID().slice(0, 8)}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    EVENTMESH_HTTP_PORT: '0',
    // The gates are on: the subscription-labelled series are shown because the operator asks for them.
    EVENTMESH_METRICS_SUBSCRIPTION_LABELS: 'true',
  });
  // A TokenAuth stand-in that authenticates everyone as tenant default's admin: the admin gate answers only an
  // authenticated caller (docs/security.md, Modes).
  const authenticated: GateFilter = {
    name: 'token',
    check: () => ({
      allow: true,
      caller: { principal: 'anonymous', tenant: DEFAULT_TENANT, scopes: ACTIONS, via: 'jwt' },
    }),
  };
  const gateOf = (name: string) =>
    new SecurityGate({
      name,
      filters: [authenticated, new DenyMarked()],
      failClosed: true,
      audit: new LoggingAuditSink(),
      auditAllows: false,
    });
  const receiver = new WebhookReceiver();
  let instance: RunningInstance;

  beforeAll(async () => {
    await receiver.start();
    instance = await startInstance(config, {
      gates: { ingress: gateOf('ingress'), admin: gateOf('admin'), close: async () => undefined },
    });
  });
  afterAll(async () => {
    await instance?.close();
    await receiver.stop();
    const temporal = await temporalClient();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(config.instance.id)]);
    await temporal.close();
  });

  const scrape = async (): Promise<Exposition> => {
    const response = await fetch(`${instance.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parsePrometheusText(await response.text());
  };
  const publish = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', ...headers },
      body,
    });

  it('counts the published and delivered events exactly, with every series the dashboard queries', async () => {
    const created = await fetch(`${instance.url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink: receiver.url, topic }),
    });
    expect(created.status).toBe(201);
    const subscription = ((await created.json()) as { id: string }).id;

    let bytes = 0;
    for (let i = 0; i < N; i++) {
      const body = JSON.stringify({
        specversion: '1.0',
        id: `m-${i}`,
        source: '/metrics',
        type: 'metrics.counted',
        data: { i },
      });
      bytes += Buffer.byteLength(body);
      expect((await publish(body)).status).toBe(202);
    }
    expect((await publish('{"specversion":"1.0"}')).status).toBe(400);
    expect(
      (
        await publish(JSON.stringify({ specversion: '1.0', id: 'denied', source: '/m', type: 't' }), {
          'x-test-deny': '1',
        })
      ).status,
    ).toBe(403);
    await waitFor(`${N} deliveries at the sink`, () => receiver.requests.length >= N, { timeoutMs: 30000 });

    // The attempt is counted when its answer is back at the loop, and the lag when the lane moved past it.
    const scraped = await waitFor(
      'the deliveries and a lag of 0 in the scrape',
      async () => {
        const s = await scrape();
        const delivered = s.samples.find(
          (x) => x.name === 'eventmesh_delivery_attempts_total' && x.labels.outcome === 'delivered',
        )?.value;
        const lag = s.samples.find(
          (x) => x.name === 'eventmesh_delivery_lag_events' && x.labels.subscription === subscription,
        )?.value;
        return delivered === N && lag === 0 && s;
      },
      { timeoutMs: 60000 },
    );

    // Publishing.
    expect(sampleOf(scraped, 'eventmesh_publish_requests_total', { outcome: 'accepted' })).toBe(N);
    expect(sampleOf(scraped, 'eventmesh_publish_requests_total', { outcome: 'invalid_cloudevent' })).toBe(1);
    expect(sampleOf(scraped, 'eventmesh_publish_requests_total', { outcome: 'forbidden' })).toBe(1);
    expect(sampleOf(scraped, 'eventmesh_publish_events_total')).toBe(N);
    expect(sampleOf(scraped, 'eventmesh_publish_bytes_total')).toBe(bytes);
    expect(sampleOf(scraped, 'eventmesh_publish_duration_seconds_count', { result: 'accepted' })).toBe(N);
    expect(sampleOf(scraped, 'eventmesh_publish_duration_seconds_count', { result: 'refused' })).toBe(2);
    expect(sampleOf(scraped, 'eventmesh_publish_duration_seconds_bucket', { result: 'accepted', le: '+Inf' })).toBe(N);
    expect(sampleOf(scraped, 'eventmesh_publish_batch_events_sum')).toBe(N);
    // The producer: every accepted event in some produce request, each acknowledged.
    expect(sampleOf(scraped, 'eventmesh_kafka_produce_batch_events_sum')).toBe(N);
    expect(sampleOf(scraped, 'eventmesh_kafka_produce_duration_seconds_count', { result: 'acked' })).toBe(
      sampleOf(scraped, 'eventmesh_kafka_produce_batch_events_count'),
    );
    expect(sampleOf(scraped, 'eventmesh_kafka_producer_held_events')).toBe(0);
    expect(sampleOf(scraped, 'eventmesh_kafka_producer_shed_total')).toBe(0);
    // Delivery: N attempts, all delivered, each timed from its record to the acknowledgement.
    expect(scraped.samples.filter((s) => s.name === 'eventmesh_delivery_attempts_total')).toEqual([
      { name: 'eventmesh_delivery_attempts_total', labels: { transport: 'webhook', outcome: 'delivered' }, value: N },
    ]);
    expect(sampleOf(scraped, 'eventmesh_delivery_publish_to_ack_seconds_count', { transport: 'webhook' })).toBe(N);
    expect(sampleOf(scraped, 'eventmesh_delivery_lag_events', { subscription, topic, partition: '0' })).toBe(0);
    expect(sampleOf(scraped, 'eventmesh_delivery_circuit_state', { subscription })).toBe(0);
    expect(sampleOf(scraped, 'eventmesh_dispatch_loops')).toBe(1);
    expect(sampleOf(scraped, 'eventmesh_delivery_parked_total')).toBe(0);
    // Runtime-wide counts read from Postgres (this spec runs alone on the test database).
    const [stored] = (await instance.deps.db.query(
      'SELECT (SELECT count(*) FROM dead_letters)::int AS dead, (SELECT count(*) FROM delivery_retries)::int AS parked, (SELECT count(*) FROM a2a_push_dead_letters WHERE resolution IS NULL)::int AS pushes',
    )) as { dead: number; parked: number; pushes: number }[];
    expect(sampleOf(scraped, 'eventmesh_delivery_dead_letters')).toBe(stored.dead);
    expect(sampleOf(scraped, 'eventmesh_a2a_push_dead_letters')).toBe(stored.pushes);
    expect(sampleOf(scraped, 'eventmesh_delivery_retry_parked')).toBe(stored.parked);
    // The gate: the subscription, the N publishes and the invalid one (refused after the gate) allowed; one denied.
    expect(sampleOf(scraped, 'eventmesh_gate_decisions_total', { gate: 'ingress', decision: 'allow' })).toBe(N + 2);
    expect(
      sampleOf(scraped, 'eventmesh_gate_decisions_total', {
        gate: 'ingress',
        decision: 'deny',
        filter: 'acl',
        reason: 'test',
      }),
    ).toBe(1);
    expect(sampleOf(scraped, 'eventmesh_request_reply_pending')).toBe(0);
    // Node's own, and the Temporal core's (merged from its exporter).
    expect(sampleOf(scraped, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    expect(scraped.families.get('nodejs_gc_duration_seconds')).toBe('histogram');
    expect(scraped.families.get('nodejs_eventloop_lag_p99_seconds')).toBe('gauge');
    expect([...scraped.families.keys()].filter((f) => f.startsWith('temporal_')).length).toBeGreaterThan(0);
    expect(scraped.samples.filter((s) => s.name === 'eventmesh_metrics_source_errors_total')).toEqual([]);

    // Every series the dashboard queries is exported (the Temporal core's too).
    const dashboard = JSON.parse(
      readFileSync(path.resolve(__dirname, '../../docs/grafana-dashboard.json'), 'utf8'),
    ) as { panels: { targets?: { expr: string }[] }[] };
    const exported = seriesNamesOf(scraped);
    const queried = new Set(dashboard.panels.flatMap((p) => (p.targets ?? []).flatMap((t) => metricNamesOf(t.expr))));
    expect([...queried].filter((n) => !exported.has(n))).toEqual([]);
  }, 120000);

  it('is not served when metrics are off, and passes the admin gate when EVENTMESH_METRICS_ADMIN_GATE=true', async () => {
    const gateway = (env: Record<string, string>) =>
      startInstance(
        testConfig({
          EVENTMESH_INSTANCE_ID: `metrics-gw-${randomUUID().slice(0, 8)}`,
          EVENTMESH_KAFKA_TOPICS: topic,
          EVENTMESH_HTTP_PORT: '0',
          ...env,
        }),
        {
          roles: ['gateway'],
          gates: { ingress: gateOf('ingress'), admin: gateOf('admin'), close: async () => undefined },
        },
      );
    const off = await gateway({ EVENTMESH_METRICS_ENABLED: 'false' });
    try {
      const response = await fetch(`${off.url}/metrics`);
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ code: 'NOT_FOUND', message: expect.any(String) as string });
      expect(off.metrics).toBeUndefined();
    } finally {
      await off.close();
    }
    const gated = await gateway({ EVENTMESH_METRICS_ADMIN_GATE: 'true' });
    try {
      const denied = await fetch(`${gated.url}/metrics`, { headers: { 'x-test-deny': '1' } });
      expect(denied.status).toBe(403);
      expect(await denied.json()).toMatchObject({ code: 'FORBIDDEN' });
      expect(await statusOf(fetch(`${gated.url}/metrics`))).toBe(200);
      // The public instance's /metrics does not ask the admin gate.
      expect(await statusOf(fetch(`${instance.url}/metrics`, { headers: { 'x-test-deny': '1' } }))).toBe(200);
    } finally {
      await gated.close();
    }
  });

  it('is served with the probes by a worker-only process, which serves nothing else', async () => {
    const workerOnly = (env: Record<string, string>) =>
      startInstance(
        testConfig({
          EVENTMESH_INSTANCE_ID: `metrics-wk-${randomUUID().slice(0, 8)}`,
          EVENTMESH_KAFKA_TOPICS: topic,
          EVENTMESH_HTTP_PORT: '0',
          ...env,
        }),
        {
          roles: ['worker'],
          gates: { ingress: gateOf('ingress'), admin: gateOf('admin'), close: async () => undefined },
        },
      );
    const worker = await workerOnly({});
    try {
      expect(worker.url).toBeUndefined();
      const base = worker.opsUrl!;
      expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const live = await fetch(`${base}/health/live`);
      expect(live.status).toBe(200);
      expect(live.headers.get('x-request-id')).toEqual(expect.any(String));
      expect(await live.json()).toMatchObject({ status: 'up', instance: worker.config.instance.id, pid: process.pid });
      // Ready once its dispatch loop runs (LOCAL_STICKY_PULL: one per partition of the topic).
      const ready = await waitFor('the worker-only process to be ready', async () => {
        const response = await fetch(`${base}/health/ready`);
        const body = (await response.json()) as { status: string; delivery: { loops: number } };
        return response.status === 200 && body.delivery.loops > 0 ? body : undefined;
      });
      expect(ready).toMatchObject({ status: 'up', delivery: { status: 'up' } });
      const health = await fetch(`${base}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: 'up' });
      const scraped = await fetch(`${base}/metrics`);
      expect(scraped.status).toBe(200);
      const exposition = parsePrometheusText(await scraped.text());
      expect(sampleOf(exposition, 'eventmesh_dispatch_loops')).toBeGreaterThan(0);
      expect([...exposition.families.keys()].filter((f) => f.startsWith('temporal_')).length).toBeGreaterThan(0);
      // Nothing of the gateway's.
      for (const [path, init] of [
        ['/events/publish', { method: 'POST', body: '{}' }],
        ['/subscriptions', {}],
        ['/metrics', { method: 'DELETE' }],
      ] as const) {
        const refused = await fetch(`${base}${path}`, init);
        expect(refused.status).toBe(404);
        expect(await refused.json()).toMatchObject({ code: 'NOT_FOUND', message: expect.any(String) as string });
      }
    } finally {
      await worker.close();
    }
    const gated = await workerOnly({ EVENTMESH_METRICS_ADMIN_GATE: 'true' });
    try {
      const denied = await fetch(`${gated.opsUrl}/metrics`, { headers: { 'x-test-deny': '1' } });
      expect(denied.status).toBe(403);
      expect(await denied.json()).toMatchObject({ code: 'FORBIDDEN' });
      expect(await statusOf(fetch(`${gated.opsUrl}/metrics`))).toBe(200);
      // The probes stay public.
      expect(await statusOf(fetch(`${gated.opsUrl}/health/live`, { headers: { 'x-test-deny': '1' } }))).toBe(200);
    } finally {
      await gated.close();
      const temporal = await temporalClient();
      await terminateWorkflows(temporal.client, [
        dispatchWorkflowIdOf(worker.config.instance.id),
        dispatchWorkflowIdOf(gated.config.instance.id),
      ]);
      await temporal.close();
    }
  });
});

import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { DataSource } from 'typeorm';
import WebSocket from 'ws';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import type { EventProducer } from '@libs/kafka';
import { buildGates } from '@libs/security';
import { createDataSource, TenantQuotaStore } from '@libs/storage';
import { NO_QUOTA as NONE, testConfig } from '../support/env';
import { HeaderToken } from '../support/header-tenant-gate';
import { waitFor } from '../support/wait-for';
import { handshakeStatus } from '../support/websocket-handshake';

const as = (tenant: string) => ({ 'x-test-principal': 'p', 'x-test-tenant': tenant });
const event = (id = randomUUID()) => ({
  specversion: '1.0',
  id,
  source: '/limits-spec',
  type: 'limits.test',
  data: { n: 1 },
});

/**
 * The limits that hold per tenant, on a real gateway with the gate's quota enforcing (real Postgres and Kafka): a
 * batch is charged per event and never above the tenant's burst, a refused request is not charged, a plain GET on
 * the WebSocket route holds no stream connection, and request-reply's pending requests are capped per tenant.
 */
describe('limits per tenant (real Postgres and Kafka, the gate enforcing)', () => {
  const run = randomUUID().slice(0, 6);
  const topic = `limits-${run}`;
  // 1 event/s with 5 s of burst: a burst of 5 events, and 5 s before a spent one is whole again, far longer than
  // the few requests of a test take.
  const QUOTA = { ...NONE, eventsPerSecond: 1, burstSeconds: 5 };
  const BURST = 5;
  const PENDING_PER_TENANT = 2;
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `limits-${run}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_SECURITY_GATE_FILTERS: 'token,quota',
    EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
    EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
    EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
    EVENTMESH_HTTP_MAX_PENDING_REQUESTS_PER_TENANT: String(PENDING_PER_TENANT),
  });
  const tenants = { batch: `batch-${run}`, refused: `refused-${run}`, streamer: `streamer-${run}` };
  let db: DataSource;
  let instance: RunningInstance;
  let url: string;

  beforeAll(async () => {
    db = createDataSource(config.postgres, `limits-spec-${run}`);
    await db.initialize();
    const quotas = new TenantQuotaStore(db);
    // Set before the instance starts, so it holds them from its first request.
    await quotas.put(tenants.batch, QUOTA);
    await quotas.put(tenants.refused, QUOTA);
    await quotas.put(tenants.streamer, { ...NONE, streamConnections: 1 });
    const gates = buildGates(config, {
      db,
      producer: {} as EventProducer,
      instanceId: config.instance.id,
      filters: { token: new HeaderToken() },
    });
    instance = await startInstance(config, { roles: ['gateway'], gates });
    url = instance.url!;
  });
  afterAll(async () => {
    await instance?.close();
    await db?.destroy();
  });

  const publishBatch = (tenant: string, events: unknown[], headers: Record<string, string> = as(tenant), to = topic) =>
    fetch(`${url}/events/publish?topic=${to}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/cloudevents-batch+json' },
      body: JSON.stringify(events),
    });
  const batchOf = (n: number) => Array.from({ length: n }, () => event());

  it("refuses a batch above the tenant's burst 413 BATCH_EXCEEDS_BURST with the largest allowed, and charges a batch per event", async () => {
    const tenant = tenants.batch;
    const tooLarge = await publishBatch(tenant, batchOf(500));
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.headers.get('retry-after')).toBeNull();
    expect(await tooLarge.json()).toMatchObject({
      code: 'BATCH_EXCEEDS_BURST',
      quota: 'events_per_second',
      maxBatchEvents: BURST,
      events: 500,
    });
    // The refused batch took nothing: the whole burst passes at once, and the next batch is over the rate.
    expect((await publishBatch(tenant, batchOf(BURST))).status).toBe(202);
    const over = await publishBatch(tenant, batchOf(BURST));
    expect(over.status).toBe(429);
    expect(await over.json()).toMatchObject({ code: 'QUOTA_EXCEEDED', quota: 'events_per_second' });
  });

  it('charges nothing for a publish refused 400, 401, 404 or 413, nor for a reply refused 404', async () => {
    const tenant = tenants.refused;
    const invalid = await publishBatch(tenant, [...batchOf(BURST - 1), { specversion: '1.0', source: '/limits-spec' }]);
    expect(invalid.status).toBe(400);
    expect(await invalid.json()).toMatchObject({ code: 'INVALID_CLOUDEVENT', index: BURST - 1 });
    const unknownTopic = await publishBatch(tenant, batchOf(BURST), as(tenant), `nowhere-${run}`);
    expect(unknownTopic.status).toBe(404);
    const anonymous = await publishBatch(tenant, batchOf(BURST), { 'x-test-tenant': tenant });
    expect(anonymous.status).toBe(401);
    const oversized = await publishBatch(tenant, [{ ...event(), data: 'x'.repeat(config.http.bodyLimitBytes) }]);
    expect(oversized.status).toBe(413);
    expect(await oversized.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    for (let i = 0; i < 3; i++) {
      const reply = await fetch(`${url}/events/reply`, {
        method: 'POST',
        headers: { ...as(tenant), 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({ ...event(), correlationid: randomUUID() }),
      });
      expect(reply.status).toBe(404);
    }
    // None of them was charged: the tenant's whole burst is there.
    const whole = await publishBatch(tenant, batchOf(BURST));
    expect(whole.status).toBe(202);
    expect((await publishBatch(tenant, batchOf(1))).status).toBe(429);
  });

  it('answers a plain GET (or HEAD) of the WebSocket route 426 UPGRADE_REQUIRED, holding no stream connection', async () => {
    const tenant = tenants.streamer;
    const created = await fetch(`${url}/subscriptions`, {
      method: 'POST',
      headers: { ...as(tenant), 'content-type': 'application/json' },
      body: JSON.stringify({ protocol: 'STREAM', topic }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const wsPath = `/subscriptions/${id}/ws`;
    for (let i = 0; i < 3; i++) {
      const plain = await fetch(`${url}${wsPath}`, { headers: as(tenant) });
      expect(plain.status).toBe(426);
      expect(plain.headers.get('upgrade')).toBe('websocket');
      expect(await plain.json()).toMatchObject({ code: 'UPGRADE_REQUIRED', upgrade: 'websocket' });
    }
    expect((await fetch(`${url}${wsPath}`, { method: 'HEAD', headers: as(tenant) })).status).toBe(426);
    // A handshake the WebSocket server refuses (no Sec-WebSocket-Key) gives its connection back when it closes.
    const refused = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${url}${wsPath}`, {
        headers: { ...as(tenant), connection: 'Upgrade', upgrade: 'websocket' },
      });
      req.on('response', (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      });
      req.on('upgrade', () => reject(new Error('upgraded without a key')));
      req.on('error', reject);
      req.end();
    });
    expect(refused).toBe(400);
    // The tenant's one stream connection is free: a WebSocket opens (within a deadline: the refused handshake's
    // connection closes on the server's side after its answer).
    const socket = await waitFor(
      "a WebSocket to open with the tenant's one stream connection",
      () =>
        new Promise<WebSocket | false>((resolve) => {
          const ws = new WebSocket(`${url.replace('http', 'ws')}${wsPath}`, { headers: as(tenant) });
          ws.once('open', () => resolve(ws));
          ws.once('unexpected-response', (_req, res) => {
            res.resume();
            resolve(false);
          });
          ws.once('error', () => resolve(false));
        }),
    );
    // And it is the tenant's only one: a second is over the quota.
    const second = await handshakeStatus(`${url.replace('http', 'ws')}${wsPath}`, as(tenant));
    expect(second).toBe(429);
    socket.close();
  });

  it("caps a tenant's pending request-replies in a gateway process: one more is 429 TOO_MANY_PENDING_REQUESTS, other tenants go on", async () => {
    const asker = `asker-${run}`;
    const other = `other-${run}`;
    const ask = (tenant: string, timeoutMs: number) =>
      fetch(`${url}/events/request?topic=${topic}&timeoutMs=${timeoutMs}`, {
        method: 'POST',
        headers: { ...as(tenant), 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify(event()),
      });
    const pendingOf = async (tenant: string) =>
      (
        (await db.query(`SELECT correlation_id FROM pending_requests WHERE tenant = $1`, [tenant])) as {
          correlation_id: string;
        }[]
      ).map((r) => r.correlation_id);
    const held = Array.from({ length: PENDING_PER_TENANT }, () => ask(asker, 60000));
    // Awaited below; a failure before that is the test's, not an unhandled rejection at the instance's close.
    for (const r of held) r.catch(() => undefined);
    await waitFor(
      "the asker's requests to be pending",
      async () => (await pendingOf(asker)).length === PENDING_PER_TENANT,
    );
    // Short: before the cap existed it waited for a reply that never comes.
    const refused = await ask(asker, 3000);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await refused.json()).toMatchObject({
      code: 'TOO_MANY_PENDING_REQUESTS',
      limit: 'tenantPendingRequests',
      maxPendingPerTenant: PENDING_PER_TENANT,
    });
    expect(await pendingOf(asker)).toHaveLength(PENDING_PER_TENANT);
    // Another tenant is not held back.
    const others = ask(other, 60000);
    others.catch(() => undefined);
    const [otherId] = await waitFor("the other tenant's request to be pending", async () => {
      const ids = await pendingOf(other);
      return ids.length === 1 ? ids : undefined;
    });
    const reply = (tenant: string, correlationId: string) =>
      fetch(`${url}/events/reply`, {
        method: 'POST',
        headers: { ...as(tenant), 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify({ ...event(), correlationid: correlationId }),
      });
    expect((await reply(other, otherId)).status).toBe(202);
    for (const id of await pendingOf(asker)) expect((await reply(asker, id)).status).toBe(202);
    expect((await Promise.all([...held, others])).map((r) => r.status)).toEqual([200, 200, 200]);
    // Answered, the asker's slots are free again.
    const again = ask(asker, 60000);
    const [againId] = await waitFor("the asker's next request to be pending", async () => {
      const ids = await pendingOf(asker);
      return ids.length === 1 ? ids : undefined;
    });
    expect((await reply(asker, againId)).status).toBe(202);
    expect((await again).status).toBe(200);
  });
});

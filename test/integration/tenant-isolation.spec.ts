import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { A2ATaskEntity, DeadLetterStore, SkippedRangeStore } from '@libs/storage';
import { testConfig, uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';
import { headerTenantGate } from '../support/header-tenant-gate';

/**
 * The gate's TokenAuth stand-in for this test: the caller's tenant and principal come from `x-test-tenant` and
 * `x-test-principal` (the real TokenAuth, from verified tokens, is tested with its own helper). No header: the
 * caller stays ANONYMOUS, tenant `default`.
 */
interface Answer {
  status: number;
  body: Record<string, unknown> | null;
}

/**
 * Tenant isolation on a real gateway, Postgres and Kafka: a tenant never sees, changes or attaches to another
 * tenant's subscriptions (nor their dead letters, skipped ranges and streams) and cannot answer another tenant's
 * pending request. Each refusal is the 404 a missing resource gets, with the same body (the id aside), so
 * existence does not leak; the owner still sees its own.
 */
describe('tenant isolation (real Postgres and Kafka)', () => {
  const topic = uniqueTopic('tenancy');
  const suffix = randomUUID().slice(0, 8);
  const [tenantA, tenantB] = [`tenant-a-${suffix}`, `tenant-b-${suffix}`];
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `tenancy-${suffix}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_HTTP_PORT: '0',
  });
  const gateOf = (name: string) => headerTenantGate(name);
  const gates = { ingress: gateOf('ingress'), admin: gateOf('admin'), close: async () => undefined };
  let instance: RunningInstance;

  const receiver = new WebhookReceiver();

  beforeAll(async () => {
    await receiver.start();
    instance = await startInstance(config, { roles: ['gateway'], gates });
  });
  afterAll(async () => {
    await instance?.close();
    await receiver.stop();
  });

  const as = (tenant: string | undefined, headers: Record<string, string> = {}) => ({
    ...(tenant ? { 'x-test-tenant': tenant, 'x-test-principal': `alice@${tenant}` } : {}),
    ...headers,
  });
  const call = async (tenant: string | undefined, method: string, path: string, body?: unknown): Promise<Answer> => {
    const response = await fetch(`${instance.url}${path}`, {
      method,
      headers: as(tenant, body === undefined ? {} : { 'content-type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
      // An event stream was opened (this must never happen for another tenant): close it, answer without a body.
      await response.body?.cancel();
      return { status: response.status, body: null };
    }
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
  };
  const create = async (tenant: string | undefined, body: Record<string, unknown>): Promise<string> => {
    const answer = await call(tenant, 'POST', '/subscriptions', { topic, ...body });
    expect(answer.status).toBe(201);
    return answer.body!.id as string;
  };
  // Tenants may not skip the validation handshake (config.trusted is the operator's): the sink answers it.
  const webhook = (tenant: string | undefined) => create(tenant, { sink: receiver.url });
  const stream = (tenant: string | undefined) => create(tenant, { protocol: 'STREAM' });

  /** The answer with the id it names replaced: what must be identical for another tenant's id and a missing one. */
  const shape = (answer: Answer, id: string) => ({
    status: answer.status,
    body: JSON.parse(JSON.stringify(answer.body).replaceAll(id, '<id>')) as unknown,
  });
  /**
   * Asserts `other` (another tenant's resource `id`) is answered exactly like `missing` (a resource that does not
   * exist, `missingId`): 404 with the given code, the same body but for the id.
   */
  const expectSameAsMissing = (
    other: Answer,
    id: string,
    missing: Answer,
    missingId: string,
    code = 'SUBSCRIPTION_NOT_FOUND',
  ) => {
    expect(missing).toMatchObject({ status: 404, body: { code } });
    expect(shape(other, id)).toEqual(shape(missing, missingId));
  };

  it('lists to each tenant its own subscriptions only', async () => {
    const a = await webhook(tenantA);
    const b = await webhook(tenantB);
    const anonymous = await webhook(undefined);
    const idsOf = async (tenant: string | undefined) =>
      ((await call(tenant, 'GET', '/subscriptions')).body as unknown as { id: string }[]).map((s) => s.id);
    const [seenByA, seenByB, seenByDefault] = [await idsOf(tenantA), await idsOf(tenantB), await idsOf(undefined)];
    expect(seenByA).toEqual([a]);
    expect(seenByB).toEqual([b]);
    expect(seenByDefault).toContain(anonymous);
    expect(seenByDefault).not.toContain(a);
    expect(seenByDefault).not.toContain(b);
    const rows: { id: string; tenant: string }[] = await instance.deps.db.query(
      `SELECT id, tenant FROM subscriptions WHERE id = ANY($1::uuid[])`,
      [[a, b, anonymous]],
    );
    expect(Object.fromEntries(rows.map((r) => [r.id, r.tenant]))).toEqual({
      [a]: tenantA,
      [b]: tenantB,
      [anonymous]: 'default',
    });
  });

  it("answers B's read, replace and delete of A's subscription exactly like a missing one, and changes nothing", async () => {
    const a = await webhook(tenantA);
    const missing = randomUUID();
    const replacement = { sink: `${receiver.url}/elsewhere` };

    expectSameAsMissing(
      await call(tenantB, 'GET', `/subscriptions/${a}`),
      a,
      await call(tenantB, 'GET', `/subscriptions/${missing}`),
      missing,
    );
    expectSameAsMissing(
      await call(tenantB, 'PUT', `/subscriptions/${a}`, replacement),
      a,
      await call(tenantB, 'PUT', `/subscriptions/${missing}`, replacement),
      missing,
    );
    expectSameAsMissing(
      await call(tenantB, 'DELETE', `/subscriptions/${a}`),
      a,
      await call(tenantB, 'DELETE', `/subscriptions/${missing}`),
      missing,
    );
    expectSameAsMissing(
      await call(tenantB, 'POST', '/events/unsubscribe', { id: a }),
      a,
      await call(tenantB, 'POST', '/events/unsubscribe', { id: missing }),
      missing,
    );
    // The anonymous caller of an open gate is tenant `default`: no more rights than B.
    expect(await call(undefined, 'GET', `/subscriptions/${a}`)).toMatchObject({
      status: 404,
      body: { code: 'SUBSCRIPTION_NOT_FOUND' },
    });

    const own = await call(tenantA, 'GET', `/subscriptions/${a}`);
    expect(own).toMatchObject({ status: 200, body: { id: a, sink: receiver.url } });
    expect(await call(tenantA, 'PUT', `/subscriptions/${a}`, replacement)).toMatchObject({
      status: 200,
      body: { id: a, sink: replacement.sink },
    });
    expect(await call(tenantA, 'DELETE', `/subscriptions/${a}`)).toEqual({ status: 204, body: null });
    expect(await call(tenantA, 'GET', `/subscriptions/${a}`)).toMatchObject({ status: 404 });
  });

  it("keeps A's dead letters (browse, read, replay, purge) and skipped ranges from B, as if the subscription did not exist", async () => {
    const a = await webhook(tenantA);
    const missing = randomUUID();
    const [written] = await new DeadLetterStore(instance.deps.db).add([
      {
        subscriptionId: a,
        topic,
        partition: 0,
        offset: 3,
        eventId: 'dead-1',
        attributes: { id: 'dead-1', source: '/t', type: 't', specversion: '1.0' },
        data: null,
        attempts: 5,
        lastError: 'HTTP 500',
        firstFailedAt: new Date(),
        lastFailedAt: new Date(),
      },
    ]);
    expect(written.written).toBe(true);
    await new SkippedRangeStore(instance.deps.db).record({
      subscriptionId: a,
      topic,
      partition: 0,
      fromOffset: 0,
      toOffset: 3,
      reason: 'RETENTION',
      epoch: 0,
    });
    try {
      const [letter] = (await call(tenantA, 'GET', `/subscriptions/${a}/dead-letters`)).body!.items as { id: string }[];
      const replayId = randomUUID();
      for (const [method, path, body] of [
        ['GET', 'dead-letters', undefined],
        ['GET', `dead-letters/${letter.id}`, undefined],
        ['POST', 'dead-letters/replays', { ids: [letter.id] }],
        ['GET', `dead-letters/replays/${replayId}`, undefined],
        ['DELETE', `dead-letters/replays/${replayId}`, undefined],
        ['DELETE', 'dead-letters?confirm=<sub>', undefined],
        ['GET', 'skipped-ranges', undefined],
      ] as const) {
        expectSameAsMissing(
          await call(tenantB, method, `/subscriptions/${a}/${path.replace('<sub>', a)}`, body),
          a,
          await call(tenantB, method, `/subscriptions/${missing}/${path.replace('<sub>', missing)}`, body),
          missing,
        );
      }
      // Nothing of A's was replayed or purged by B's attempts.
      expect(await call(tenantA, 'GET', `/subscriptions/${a}/dead-letters/${letter.id}`)).toMatchObject({
        status: 200,
        body: { replayedAt: null },
      });
      expect(await call(tenantA, 'GET', `/subscriptions/${a}/dead-letters`)).toMatchObject({
        status: 200,
        body: { items: [{ eventId: 'dead-1', offset: 3 }], next: null },
      });
      expect(await call(tenantA, 'GET', `/subscriptions/${a}/skipped-ranges`)).toMatchObject({
        status: 200,
        body: [{ fromOffset: 0, toOffset: 3, events: 3 }],
      });
    } finally {
      // The skipped range would show on /health (EVENTS_SKIPPED) for the specs that run after this one.
      await instance.deps.db.query(`DELETE FROM subscriptions WHERE id = $1`, [a]);
    }
  });

  it("refuses B a stream of A's subscription (SSE, long-poll, acks) exactly like a missing one", async () => {
    const a = await stream(tenantA);
    const missing = randomUUID();
    const ack = { deliveryId: 'not-handed-out', action: 'ack' };
    for (const [method, path, body] of [
      ['GET', 'events', undefined],
      ['GET', 'poll?waitMs=0', undefined],
      ['POST', 'acks', ack],
    ] as const) {
      expectSameAsMissing(
        await call(tenantB, method, `/subscriptions/${a}/${path}`, body),
        a,
        await call(tenantB, method, `/subscriptions/${missing}/${path}`, body),
        missing,
      );
    }

    // A attaches: an empty poll, an open SSE stream, and an answer checked against the deliveries (none here).
    expect(await call(tenantA, 'GET', `/subscriptions/${a}/poll?waitMs=0`)).toMatchObject({
      status: 200,
      body: { deliveries: [] },
    });
    expect(await call(tenantA, 'POST', `/subscriptions/${a}/acks`, ack)).toMatchObject({
      status: 409,
      body: { code: 'UNKNOWN_DELIVERY' },
    });
    const closing = new AbortController();
    try {
      const sse = await fetch(`${instance.url}/subscriptions/${a}/events`, {
        headers: as(tenantA),
        signal: closing.signal,
      });
      expect(sse.status).toBe(200);
      expect(sse.headers.get('content-type')).toBe('text/event-stream');
    } finally {
      closing.abort();
    }
  });

  it("refuses B a WebSocket handshake on A's subscription exactly like a missing one, and lets A in", async () => {
    const a = await stream(tenantA);
    const missing = randomUUID();
    /** The handshake's outcome: `open`, or the HTTP answer that refused it. */
    const handshake = (id: string, tenant: string) =>
      new Promise<Answer | 'open'>((resolve, reject) => {
        const socket = new WebSocket(`${instance.url!.replace(/^http/, 'ws')}/subscriptions/${id}/ws`, {
          headers: as(tenant),
        });
        const timer = setTimeout(() => {
          socket.terminate();
          reject(new Error('no handshake answer within 60 s'));
        }, 60000);
        socket.on('open', () => {
          clearTimeout(timer);
          socket.close();
          resolve('open');
        });
        socket.on('unexpected-response', (_request, response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk.toString()));
          response.on('end', () => {
            clearTimeout(timer);
            socket.terminate();
            resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> });
          });
        });
        socket.on('error', (e) => {
          clearTimeout(timer);
          reject(e);
        });
      });
    const refused = await handshake(a, tenantB);
    const unknown = await handshake(missing, tenantB);
    expect(refused).not.toBe('open');
    expectSameAsMissing(refused as Answer, a, unknown as Answer, missing);
    expect(await handshake(a, tenantA)).toBe('open');
  }, 240000);

  describe('request-reply', () => {
    /** A request of `tenant`, its answer read in full whenever it comes (a failed test leaves no response half read). */
    const ask = async (tenant: string, timeoutMs: number): Promise<Answer> => {
      const response = await fetch(`${instance.url}/events/request?topic=${topic}&timeoutMs=${timeoutMs}`, {
        method: 'POST',
        headers: as(tenant, { 'content-type': 'application/cloudevents+json' }),
        body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/asker', type: 'tenancy.ask' }),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const reply = async (tenant: string, correlationId: string, source: string): Promise<Answer> => {
      const response = await fetch(`${instance.url}/events/reply`, {
        method: 'POST',
        headers: as(tenant, { 'content-type': 'application/cloudevents+json' }),
        body: JSON.stringify({
          specversion: '1.0',
          id: randomUUID(),
          source,
          type: 'tenancy.answer',
          correlationid: correlationId,
        }),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    /** The correlation id of the one request `tenant` has waiting (its row carries the tenant). */
    const pendingOf = (tenant: string) =>
      waitFor(`a pending request of ${tenant}`, async () => {
        const rows: { correlation_id: string }[] = await instance.deps.db.query(
          `SELECT correlation_id FROM pending_requests WHERE instance_id = $1 AND tenant = $2`,
          [config.instance.id, tenant],
        );
        return rows.length === 1 ? rows[0].correlation_id : undefined;
      });

    it("refuses B's reply to A's request like a reply to no request, and A's request gets A's reply", async () => {
      const asked = ask(tenantA, 60000);
      const correlationId = await pendingOf(tenantA);
      const missing = randomUUID();
      expectSameAsMissing(
        await reply(tenantB, correlationId, '/intruder'),
        correlationId,
        await reply(tenantB, missing, '/intruder'),
        missing,
        'REQUEST_NOT_PENDING',
      );
      expect(await reply(tenantA, correlationId, '/owner')).toEqual({
        status: 202,
        body: { correlationId, delivered: true },
      });
      expect(await asked).toMatchObject({ status: 200, body: { source: '/owner', correlationid: correlationId } });
    }, 120000);

    it("lets A's request time out when only B replied", async () => {
      // The timeout is the promise (408 after 2 s): the row is written as the request arrives and B's one reply is a
      // few queries, well inside 2 s even on a loaded 2-core host.
      const asked = ask(tenantA, 2000);
      const correlationId = await pendingOf(tenantA);
      expect(await reply(tenantB, correlationId, '/intruder')).toMatchObject({
        status: 404,
        body: { code: 'REQUEST_NOT_PENDING', reason: 'unknown' },
      });
      expect(await asked).toMatchObject({ status: 408, body: { code: 'REQUEST_TIMEOUT', correlationId } });
    });
  });

  // The A2A routes' own isolation is tested in a2a.spec.ts; here, the tasks table's tenant column at the storage level.
  it('stores A2A tasks with their tenant (default when none is given), readable by tenant', async () => {
    const [owned, unowned] = [`task-${randomUUID()}`, `task-${randomUUID()}`];
    const tasks = instance.deps.db.getRepository(A2ATaskEntity);
    await tasks.insert({ id: owned, tenant: tenantA, contextId: `ctx-${suffix}`, state: 'submitted' });
    await tasks.insert({ id: unowned, contextId: `ctx-${suffix}`, state: 'submitted' });
    expect((await tasks.findBy({ contextId: `ctx-${suffix}`, tenant: tenantA })).map((t) => t.id)).toEqual([owned]);
    expect(await tasks.findOneBy({ id: owned, tenant: tenantB })).toBeNull();
    expect(await tasks.findOneBy({ id: unowned })).toMatchObject({ tenant: 'default' });
  });
});

import { randomUUID } from 'node:crypto';
import { RunningInstance, startInstance } from '../../apps/instance/src/instance';
import { tenantTopicOf } from '@libs/kafka';
import { AuditRecord, CloudEventsAuditSink, SecurityGate } from '@libs/security';
import { testConfig, uniqueTopic } from '../support/env';
import { HeaderTenantFilter, headerTenantGate } from '../support/header-tenant-gate';
import { waitFor } from '../support/wait-for';
import { kafkaTopicNames, kafkaTopicSettings, storedEvents, topicEndOffset } from '../support/topic-offsets';

interface Answer {
  status: number;
  body: Record<string, unknown> | null;
}

/**
 * Topics belong to tenants, on a real gateway, worker, Postgres and Kafka: each tenant's names are its own (two
 * tenants' `orders` are two Kafka topics), no name a tenant gives reaches another tenant's topic, each tenant has
 * at most EVENTMESH_KAFKA_TENANT_TOPICS_MAX topics, a shared topic is used by another tenant than the operator's
 * only with the operator's grant (EVENTMESH_KAFKA_SHARED_TOPIC_ACCESS=GRANTED), and the audit topic is the
 * runtime's to write, each tenant's to read its own records of (the operator's, every record). Every refusal writes nothing. The caller's tenant comes from `x-test-tenant` (no header:
 * tenant `default`, the operator tenant).
 */
describe('tenant topics (real Postgres and Kafka)', () => {
  const shared = uniqueTopic('shared');
  const audit = uniqueTopic('audit');
  const suffix = randomUUID().slice(0, 8);
  const [tenantA, tenantB, tenantC] = [`topics-a-${suffix}`, `topics-b-${suffix}`, `topics-c-${suffix}`];
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `tenant-topics-${suffix}`,
    EVENTMESH_KAFKA_TOPICS: `${shared},${audit}`,
    EVENTMESH_KAFKA_TENANT_TOPICS_MAX: '2',
    EVENTMESH_KAFKA_TENANT_TOPIC_MAX_PARTITIONS: '4',
    EVENTMESH_KAFKA_SHARED_TOPIC_ACCESS: 'GRANTED',
    EVENTMESH_SECURITY_GATE_AUDIT_SINK: 'CLOUDEVENTS',
    EVENTMESH_SECURITY_GATE_AUDIT_TOPIC: audit,
    EVENTMESH_DELIVERY_TOPOLOGY: 'LOCAL_STICKY_PULL',
    EVENTMESH_HTTP_PORT: '0',
  });
  /** What the admin gate audited: as the configured admin gate (libs/security/gates.ts), it audits every decision. */
  const adminAudit: AuditRecord[] = [];
  const gates = {
    ingress: headerTenantGate('ingress'),
    admin: new SecurityGate({
      name: 'admin',
      filters: [new HeaderTenantFilter()],
      failClosed: true,
      audit: { record: (r) => adminAudit.push(r) },
      auditAllows: true,
    }),
    close: async () => undefined,
  };
  let instance: RunningInstance;

  beforeAll(async () => {
    instance = await startInstance(config, { roles: ['gateway', 'worker'], gates });
  });
  afterAll(async () => {
    // The tenants' Kafka topics go with the test.
    for (const tenant of [tenantA, tenantB, tenantC])
      for (const t of ((await call(tenant, 'GET', '/topics')).body?.topics ?? []) as { name: string }[])
        await call(tenant, 'DELETE', `/topics/${t.name}`);
    await instance?.close();
  });

  const call = async (tenant: string | undefined, method: string, path: string, body?: unknown): Promise<Answer> => {
    const response = await fetch(`${instance.url}${path}`, {
      method,
      headers: {
        ...(tenant ? { 'x-test-tenant': tenant } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
  };
  const publish = (tenant: string | undefined, topic: string, id: string) =>
    call(tenant, 'POST', `/events/publish?topic=${encodeURIComponent(topic)}`, {
      specversion: '1.0',
      id,
      source: '/tenant-topics',
      type: 'test.tenant.topic',
    });
  const ends = (topic: string) => topicEndOffset(instance.deps.kafka, topic);
  const stored = (topic: string) => storedEvents(instance.deps.topics, topic);
  const subscriptionsOf = async (tenant: string): Promise<number> =>
    Number(
      (await instance.deps.db.query(`SELECT count(*)::int AS n FROM subscriptions WHERE tenant = $1`, [tenant]))[0].n,
    );

  it("gives two tenants' topics of one name two Kafka topics, and each tenant's events reach its own topic only", async () => {
    expect(await call(tenantA, 'POST', '/topics', { name: 'orders', partitions: 2 })).toMatchObject({
      status: 201,
      body: { name: 'orders', partitions: 2, retentionMs: null },
    });
    expect(await call(tenantB, 'POST', '/topics', { name: 'orders', retentionMs: 3_600_000 })).toMatchObject({
      status: 201,
      body: { name: 'orders', retentionMs: 3_600_000 },
    });
    expect(await call(tenantA, 'GET', '/topics')).toMatchObject({
      status: 200,
      body: { topics: [{ name: 'orders' }] },
    });
    expect((await call(tenantA, 'GET', '/topics')).body!.topics).toHaveLength(1);

    const sub = await call(tenantA, 'POST', '/subscriptions', {
      protocol: 'STREAM',
      topic: 'orders',
      config: { startFrom: 'earliest' },
    });
    expect(sub).toMatchObject({ status: 201, body: { topic: 'orders' } });
    expect(await publish(tenantA, 'orders', 'from-a')).toMatchObject({ status: 202, body: { topic: 'orders' } });
    expect(await publish(tenantB, 'orders', 'from-b')).toMatchObject({ status: 202, body: { topic: 'orders' } });
    expect(await ends(tenantTopicOf(tenantA, 'orders'))).toBe(1);
    expect(await ends(tenantTopicOf(tenantB, 'orders'))).toBe(1);

    // A's subscription gets A's event, not B's.
    const polled = await call(tenantA, 'GET', `/subscriptions/${sub.body!.id as string}/poll?max=10&waitMs=20000`);
    expect(polled.status).toBe(200);
    expect((polled.body!.deliveries as { event: { id: string } }[]).map((d) => d.event.id)).toEqual(['from-a']);
  });

  it("configures a tenant's own topic in Kafka: partitions grow, retention is set; a shrink, the cap and another tenant are refused, changing nothing", async () => {
    const aKafka = tenantTopicOf(tenantA, 'orders');
    expect(await call(tenantA, 'PATCH', '/topics/orders', { partitions: 3, retentionMs: 7_200_000 })).toMatchObject({
      status: 200,
      body: { name: 'orders', partitions: 3, retentionMs: 7_200_000 },
    });
    expect(await kafkaTopicSettings(instance.deps.kafka, aKafka)).toEqual({ partitions: 3, retentionMs: '7200000' });
    // The grown topic is published to at once, over every partition it has now.
    for (let i = 0; i < 12; i++) expect(await publish(tenantA, 'orders', `grown-${i}`)).toMatchObject({ status: 202 });

    const refusals: [string | undefined, unknown, number, Record<string, unknown>][] = [
      [tenantA, { partitions: 2 }, 400, { code: 'INVALID_REQUEST', field: 'partitions', reason: 'shrink' }],
      [tenantA, { partitions: 5 }, 400, { code: 'INVALID_REQUEST', field: 'partitions', maxPartitions: 4 }],
      [tenantA, { partitions: 2, retentionMs: 60_000 }, 400, { field: 'partitions' }],
      [tenantA, { retentionMs: 1 }, 400, { code: 'INVALID_REQUEST', field: 'retentionMs' }],
      [tenantA, {}, 400, { code: 'INVALID_REQUEST' }],
      [tenantC, { partitions: 4, retentionMs: 60_000 }, 404, { code: 'UNKNOWN_TOPIC' }],
    ];
    for (const [tenant, body, status, answer] of refusals)
      expect(await call(tenant, 'PATCH', '/topics/orders', body)).toMatchObject({ status, body: answer });
    expect(await kafkaTopicSettings(instance.deps.kafka, aKafka)).toEqual({ partitions: 3, retentionMs: '7200000' });
    expect(await call(tenantA, 'GET', '/topics/orders')).toMatchObject({
      body: { partitions: 3, retentionMs: 7_200_000 },
    });
    // B's topic of the same name is another topic: untouched by A's change.
    expect(await kafkaTopicSettings(instance.deps.kafka, tenantTopicOf(tenantB, 'orders'))).toMatchObject({
      retentionMs: '3600000',
    });
  });

  it("refuses a tenant every name of another tenant's topic (404 as a missing topic), writing nothing", async () => {
    const aKafka = tenantTopicOf(tenantA, 'orders');
    const before = await ends(aKafka);
    const missing = await publish(tenantC, 'no-such-topic', 'x');
    expect(missing).toMatchObject({ status: 404, body: { code: 'UNKNOWN_TOPIC' } });
    // C has no `orders`: A's and B's do not leak; nor does the Kafka name of A's.
    for (const name of ['orders', aKafka]) {
      expect(await publish(tenantC, name, 'from-c')).toMatchObject({ status: 404, body: { code: 'UNKNOWN_TOPIC' } });
      expect(await call(tenantC, 'POST', '/subscriptions', { protocol: 'STREAM', topic: name })).toMatchObject({
        status: 404,
        body: { code: 'UNKNOWN_TOPIC' },
      });
      expect(await call(tenantC, 'GET', `/topics/${encodeURIComponent(name)}`)).toMatchObject({ status: 404 });
      expect(await call(tenantC, 'DELETE', `/topics/${encodeURIComponent(name)}`)).toMatchObject({ status: 404 });
    }
    expect(await publish(tenantB, aKafka, 'from-b')).toMatchObject({ status: 404, body: { code: 'UNKNOWN_TOPIC' } });
    expect(await ends(aKafka)).toBe(before);
    expect(await subscriptionsOf(tenantC)).toBe(0);
    expect(await call(tenantC, 'GET', '/topics')).toEqual({ status: 200, body: { topics: [] } });
  });

  it('caps the topics of a tenant, and refuses bad input with 400 and a taken name with 409, creating nothing', async () => {
    expect((await call(tenantA, 'POST', '/topics', { name: 'second' })).status).toBe(201);
    const refusals: [unknown, number, string][] = [
      [{ name: 'third' }, 409, 'TOPIC_LIMIT_REACHED'],
      [{ name: 'orders' }, 409, 'TOPIC_EXISTS'],
      [{ name: 'a.b' }, 400, 'INVALID_REQUEST'],
      [{ name: 'fine', partitions: 5 }, 400, 'INVALID_REQUEST'],
      [{ name: 'fine', retentionMs: 1 }, 400, 'INVALID_REQUEST'],
      [{ name: 'fine', extra: true }, 400, 'INVALID_REQUEST'],
    ];
    for (const [body, status, code] of refusals)
      expect(await call(tenantA, 'POST', '/topics', body)).toMatchObject({ status, body: { code } });
    // A shared topic's name is the operator's: no tenant takes it.
    expect(await call(tenantC, 'POST', '/topics', { name: shared })).toMatchObject({
      status: 409,
      body: { code: 'TOPIC_EXISTS', reason: 'shared' },
    });
    const rows: { tenant: string; name: string }[] = await instance.deps.db.query(
      `SELECT tenant, name FROM tenant_topics WHERE tenant = ANY($1) ORDER BY tenant, name`,
      [[tenantA, tenantC]],
    );
    expect(rows).toEqual([
      { tenant: tenantA, name: 'orders' },
      { tenant: tenantA, name: 'second' },
    ]);
    const kafkaTopics = await kafkaTopicNames(instance.deps.kafka);
    expect(kafkaTopics).not.toContain(tenantTopicOf(tenantA, 'third'));
    expect(kafkaTopics).not.toContain(tenantTopicOf(tenantA, 'fine'));
    // Another tenant's cap is its own.
    expect((await call(tenantC, 'POST', '/topics', { name: 'third' })).status).toBe(201);
  });

  it('deletes a topic no subscription reads, with its events; its name stops resolving, and can be made again', async () => {
    const sub = await call(tenantB, 'POST', '/subscriptions', { protocol: 'STREAM', topic: 'orders' });
    expect(sub.status).toBe(201);
    expect(await call(tenantB, 'DELETE', '/topics/orders')).toMatchObject({
      status: 409,
      body: { code: 'TOPIC_IN_USE', subscriptions: 1 },
    });
    const bKafka = tenantTopicOf(tenantB, 'orders');
    expect(await stored(bKafka)).toBe(1);
    expect((await call(tenantB, 'DELETE', `/subscriptions/${sub.body!.id as string}`)).status).toBe(204);
    expect((await call(tenantB, 'DELETE', '/topics/orders')).status).toBe(204);
    expect(await call(tenantB, 'GET', '/topics')).toEqual({ status: 200, body: { topics: [] } });
    expect(await publish(tenantB, 'orders', 'late')).toMatchObject({ status: 404, body: { code: 'UNKNOWN_TOPIC' } });
    expect(await stored(bKafka)).toBe(0);
    // A's topic of the same name is untouched, and every producer goes on publishing (the Kafka topic stays).
    expect((await publish(tenantA, 'orders', 'still-a')).status).toBe(202);
    expect((await publish(undefined, shared, 'shared-operator')).status).toBe(202);
    // Made again, the name is B's topic again, with none of the old events.
    expect(await call(tenantB, 'POST', '/topics', { name: 'orders', partitions: 1 })).toMatchObject({
      status: 201,
      body: { name: 'orders', partitions: 4, retentionMs: null },
    });
    expect((await publish(tenantB, 'orders', 'again')).status).toBe(202);
    expect(await stored(bKafka)).toBe(1);
  });

  it("keeps the audit topic the runtime's: nobody publishes to it; a tenant is delivered its own records only, the operator every one", async () => {
    const before = await ends(audit);
    for (const tenant of [tenantA, undefined])
      expect(await publish(tenant, audit, 'forged')).toMatchObject({
        status: 403,
        body: { code: 'FORBIDDEN', reason: 'reserved_topic' },
      });
    expect(await ends(audit)).toBe(before);

    const readers = new Map<string | undefined, string>();
    for (const tenant of [tenantA, tenantB, undefined]) {
      const sub = await call(tenant, 'POST', '/subscriptions', {
        protocol: 'STREAM',
        topic: audit,
        config: { startFrom: 'earliest' },
      });
      expect(sub).toMatchObject({ status: 201, body: { topic: audit } });
      readers.set(tenant, sub.body!.id as string);
    }
    // The runtime's own audit sink writes a record of each tenant (the gate here audits to the log).
    const sink = new CloudEventsAuditSink(instance.deps.producer, audit, config.instance.id);
    const recordOf = (tenant: string, requestId: string): AuditRecord => ({
      time: new Date().toISOString(),
      gate: 'admin',
      requestId,
      principal: `svc-${tenant}`,
      tenant,
      route: 'POST /subscriptions',
      action: 'admin',
      decision: 'deny',
      enforced: true,
      reason: 'test',
      remoteAddress: '127.0.0.1',
    });
    sink.record(recordOf(tenantB, 'of-b'));
    sink.record(recordOf(tenantA, 'of-a'));
    sink.record(recordOf('default', 'of-operator'));
    await sink.close();
    expect(sink.stats().written).toBe(3);

    expect(await readAll(tenantA, readers.get(tenantA)!)).toEqual(['of-a']);
    expect(await readAll(tenantB, readers.get(tenantB)!)).toEqual(['of-b']);
    expect((await readAll(undefined, readers.get(undefined)!)).sort()).toEqual(['of-a', 'of-b', 'of-operator']);
  });

  /**
   * The request ids of the audit records a subscription is delivered, each acked, until its committed offsets reach
   * the topic's end on every partition: every record was delivered to it or passed over, none is still to come.
   */
  async function readAll(tenant: string | undefined, subscription: string): Promise<string[]> {
    const seen: string[] = [];
    await waitFor(
      `subscription ${subscription} at the end of the audit topic`,
      async () => {
        const polled = await call(
          tenant,
          'GET',
          `/subscriptions/${subscription}/poll?consumer=reader&max=10&waitMs=200`,
        );
        for (const { deliveryId, event } of polled.body!.deliveries as {
          deliveryId: string;
          event: Answer['body'];
        }[]) {
          seen.push((event!.data as AuditRecord).requestId);
          const ack = await call(tenant, 'POST', `/subscriptions/${subscription}/acks`, { deliveryId, action: 'ack' });
          expect(ack.status).toBe(200);
        }
        const view = await call(tenant, 'GET', `/subscriptions/${subscription}/offsets`);
        const partitions = view.body!.partitions as { committed: number | null; start: number; end: number }[];
        return partitions.every((p) => (p.committed ?? p.start) === p.end);
      },
      { timeoutMs: 30000 },
    );
    return seen;
  }

  it("lets another tenant than the operator's use a shared topic only as the operator granted, until revoked", async () => {
    const grants = `/admin/topics/${shared}/grants`;
    const before = await ends(shared);
    const refused = { status: 403, body: { code: 'FORBIDDEN', reason: 'no_grant' } };
    expect(await publish(tenantC, shared, 'no-grant')).toMatchObject(refused);
    expect(await call(tenantC, 'POST', '/subscriptions', { protocol: 'STREAM', topic: shared })).toMatchObject(refused);
    expect(await ends(shared)).toBe(before);
    expect(await subscriptionsOf(tenantC)).toBe(0);

    // Bad input changes nothing.
    const badGrants: [string, string, unknown, number][] = [
      ['POST', grants, { tenant: tenantC, action: 'admin' }, 400],
      ['POST', grants, { tenant: tenantC, action: 'publish', extra: 1 }, 400],
      ['POST', `/admin/topics/no-such-topic/grants`, { tenant: tenantC, action: 'publish' }, 404],
      ['POST', `/admin/topics/${audit}/grants`, { tenant: tenantC, action: 'subscribe' }, 400],
      ['DELETE', `${grants}/${tenantC}/publish`, undefined, 404],
      ['DELETE', `${grants}/${tenantC}/admin`, undefined, 400],
    ];
    for (const [method, path, body, status] of badGrants)
      expect((await call(undefined, method, path, body)).status).toBe(status);
    expect(await call(undefined, 'GET', grants)).toEqual({ status: 200, body: { grants: [] } });

    expect(await call(undefined, 'POST', grants, { tenant: tenantC, action: 'publish' })).toMatchObject({
      status: 201,
      body: { topic: shared, tenant: tenantC, action: 'publish' },
    });
    expect((await call(undefined, 'POST', grants, { tenant: tenantC, action: 'publish' })).status).toBe(200);
    expect((await publish(tenantC, shared, 'granted')).status).toBe(202);
    // Publish is not subscribe; nor is C's grant B's.
    expect(await call(tenantC, 'POST', '/subscriptions', { protocol: 'STREAM', topic: shared })).toMatchObject(refused);
    expect(await publish(tenantB, shared, 'not-b')).toMatchObject(refused);
    expect((await call(undefined, 'POST', grants, { tenant: tenantC, action: 'subscribe' })).status).toBe(201);
    expect((await call(tenantC, 'POST', '/subscriptions', { protocol: 'STREAM', topic: shared })).status).toBe(201);
    expect((await call(undefined, 'GET', grants)).body!.grants).toHaveLength(2);

    expect((await call(undefined, 'DELETE', `${grants}/${tenantC}/publish`)).status).toBe(204);
    expect(await publish(tenantC, shared, 'revoked')).toMatchObject(refused);
    expect(await ends(shared)).toBe(before + 1);
    // Each grant and revoke is audited by the admin gate: who, which route, its decision.
    const audited = (method: string) =>
      adminAudit.filter(
        (r) => r.route === `${method} /admin/topics/:topic/grants${method === 'DELETE' ? '/:tenant/:action' : ''}`,
      );
    // Every grants request of the case, one record each: 7 POST, 3 DELETE (the gate allowed those the route refused).
    expect(audited('POST')).toHaveLength(7);
    expect(audited('DELETE')).toHaveLength(3);
    for (const record of [...audited('POST'), ...audited('DELETE')])
      expect(record).toMatchObject({ gate: 'admin', principal: 'anonymous', tenant: 'default', decision: 'allow' });
  });
});

import { randomUUID } from 'node:crypto';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { testConfig, uniqueTopic } from '../support/env';
import { headerTenantGate } from '../support/header-tenant-gate';

interface Answer {
  status: number;
  body: Record<string, unknown> & { id?: string; name?: string; code?: string };
}

/**
 * A subscription's name through the gateway (real Postgres, Kafka topic metadata): unique within a tenant, found
 * by it, and ensured by it (`PUT /subscriptions/by-name/{name}`) idempotently, concurrent ensures included.
 * Tenants come from `x-test-tenant` (the gate's TokenAuth stand-in).
 */
describe('subscription names (real gateway and Postgres)', () => {
  const topic = uniqueTopic('sub-names');
  const other = uniqueTopic('sub-names-other');
  const suffix = randomUUID().slice(0, 8);
  const [tenantA, tenantB] = [`names-a-${suffix}`, `names-b-${suffix}`];
  const gates = {
    ingress: headerTenantGate('ingress'),
    admin: headerTenantGate('admin'),
    close: async () => undefined,
  };
  let instance: RunningInstance;

  beforeAll(async () => {
    instance = await startInstance(
      testConfig({ EVENTMESH_KAFKA_TOPICS: `${topic},${other}`, EVENTMESH_HTTP_PORT: '0' }),
      { roles: ['gateway'], gates },
    );
  });
  afterAll(() => instance?.close());

  const call = async (tenant: string, method: string, path: string, body?: unknown): Promise<Answer> => {
    const response = await fetch(`${instance.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', 'x-test-tenant': tenant },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Answer['body']) : {} };
  };
  const stream = (extra: Record<string, unknown> = {}) => ({ protocol: 'STREAM', topic, ...extra });
  const ensure = (tenant: string, name: string, body: unknown) =>
    call(tenant, 'PUT', `/subscriptions/by-name/${name}`, body);

  it('a create takes a name, shows it, lists by it; the same name again is 409 naming the holder', async () => {
    const created = await call(tenantA, 'POST', '/subscriptions', stream({ name: 'orders' }));
    expect(created).toMatchObject({ status: 201, body: { name: 'orders', topic } });
    expect((await call(tenantA, 'GET', `/subscriptions/${created.body.id}`)).body.name).toBe('orders');
    const listed = await call(tenantA, 'GET', '/subscriptions?name=orders');
    expect((listed.body as unknown as Answer['body'][]).map((s) => s.id)).toEqual([created.body.id]);

    expect(await call(tenantA, 'POST', '/subscriptions', stream({ name: 'orders' }))).toEqual({
      status: 409,
      body: {
        code: 'SUBSCRIPTION_NAME_TAKEN',
        message: 'subscription name "orders" is taken',
        field: 'name',
        name: 'orders',
        id: created.body.id,
      },
    });
    // Another tenant's namespace is its own.
    expect(await call(tenantB, 'POST', '/subscriptions', stream({ name: 'orders' }))).toMatchObject({ status: 201 });
    expect(((await call(tenantA, 'GET', '/subscriptions?name=orders')).body as unknown as unknown[]).length).toBe(1);
  });

  it('refuses a bad name with 400 naming the field, and creates nothing', async () => {
    const before = ((await call(tenantA, 'GET', '/subscriptions')).body as unknown as unknown[]).length;
    expect(await call(tenantA, 'POST', '/subscriptions', stream({ name: 'a b' }))).toMatchObject({
      status: 400,
      body: { code: 'INVALID_REQUEST', field: 'name' },
    });
    expect(await ensure(tenantA, 'x', stream({ name: 'y' }))).toMatchObject({
      status: 400,
      body: { code: 'INVALID_REQUEST', field: 'name' },
    });
    expect(((await call(tenantA, 'GET', '/subscriptions')).body as unknown as unknown[]).length).toBe(before);
  });

  it('ensure creates (201), then answers the same one (200); a changed filter replaces it in place', async () => {
    const first = await ensure(tenantA, 'billing', stream({ config: { policy: 'BROADCAST' } }));
    expect(first).toMatchObject({ status: 201, body: { name: 'billing', config: { policy: 'BROADCAST' } } });
    const again = await ensure(tenantA, 'billing', stream({ config: { policy: 'BROADCAST' } }));
    expect(again).toEqual({ status: 200, body: first.body });

    const filters = [{ exact: { type: 'invoice.paid' } }];
    const changed = await ensure(tenantA, 'billing', stream({ filters, config: { policy: 'BROADCAST' } }));
    expect(changed).toMatchObject({ status: 200, body: { id: first.body.id, filters } });
    expect(((await call(tenantA, 'GET', '/subscriptions?name=billing')).body as unknown as unknown[]).length).toBe(1);
  });

  it('ensure under a name whose subscription reads another topic is 409, and changes nothing', async () => {
    const held = await ensure(tenantA, 'audit', stream());
    expect(await ensure(tenantA, 'audit', stream({ topic: other }))).toMatchObject({
      status: 409,
      body: { code: 'SUBSCRIPTION_NAME_TAKEN', id: held.body.id },
    });
    expect((await call(tenantA, 'GET', `/subscriptions/${held.body.id}`)).body.topic).toBe(topic);
  });

  it('ensures of one name at once end with one subscription, every caller answered with it', async () => {
    const answers = await Promise.all(Array.from({ length: 8 }, () => ensure(tenantA, 'racing', stream())));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
  });

  it('a replace keeps the name; a body naming another is refused', async () => {
    const named = await ensure(tenantA, 'kept', stream());
    expect(await call(tenantA, 'PUT', `/subscriptions/${named.body.id}`, { name: 'renamed' })).toMatchObject({
      status: 400,
      body: { code: 'INVALID_REQUEST', field: 'name' },
    });
    expect(await call(tenantA, 'PUT', `/subscriptions/${named.body.id}`, { filters: [] })).toMatchObject({
      status: 200,
      body: { name: 'kept' },
    });
  });
});

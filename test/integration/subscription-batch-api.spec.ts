import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { testConfig, uniqueTopic } from '../support/env';

/** `config.batch` through the gateway (real Postgres): what a create takes and shows, what it refuses (changing nothing). */
describe('subscription batch settings over HTTP (real gateway and Postgres)', () => {
  const topic = uniqueTopic('batch-api');
  const config = testConfig({ EVENTMESH_KAFKA_TOPICS: topic, EVENTMESH_HTTP_PORT: '0' });
  let instance: RunningInstance;

  beforeAll(async () => {
    instance = await startInstance(config, { roles: ['gateway'] });
  });
  afterAll(() => instance?.close());

  const create = async (body: Record<string, unknown>) => {
    const response = await fetch(`${instance.url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink: 'http://127.0.0.1:9/hook', topic, ...body }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const read = async (id: string) =>
    (await (await fetch(`${instance.url}/subscriptions/${id}`)).json()) as { config: Record<string, unknown> };
  const count = async () => ((await (await fetch(`${instance.url}/subscriptions`)).json()) as unknown[]).length;

  it('takes a batch setting and shows it on GET, each absent field with its default', async () => {
    const created = await create({ config: { trusted: true, batch: { maxEvents: 50 } } });
    expect(created.status).toBe(201);
    expect((await read(String(created.body.id))).config.batch).toEqual({
      maxEvents: 50,
      maxBytes: 262144,
      lingerMs: 0,
    });
    const replaced = await fetch(`${instance.url}/subscriptions/${String(created.body.id)}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        sink: 'http://127.0.0.1:9/hook',
        config: { trusted: true, batch: { maxEvents: 7, maxBytes: 4096, lingerMs: 250 } },
      }),
    });
    expect(replaced.status).toBe(200);
    expect((await read(String(created.body.id))).config.batch).toEqual({ maxEvents: 7, maxBytes: 4096, lingerMs: 250 });
  });

  it.each([
    [{ maxEvents: 0 }, 'config.batch.maxEvents'],
    [{ maxEvents: 501 }, 'config.batch.maxEvents'],
    [{ maxEvents: 2.5 }, 'config.batch.maxEvents'],
    [{ maxBytes: 1023 }, 'config.batch.maxBytes'],
    [{ maxBytes: 1048577 }, 'config.batch.maxBytes'],
    [{ lingerMs: -1 }, 'config.batch.lingerMs'],
    [{ lingerMs: 10001 }, 'config.batch.lingerMs'],
    [{ lingerMs: '5' }, 'config.batch.lingerMs'],
    [{ size: 5 }, 'config.batch'],
  ])('refuses batch %j with 400 INVALID_REQUEST naming %s, creating nothing', async (batch, field) => {
    const before = await count();
    const refused = await create({ config: { trusted: true, batch } });
    expect(refused).toMatchObject({
      status: 400,
      body: {
        code: 'INVALID_REQUEST',
        field,
        message: expect.stringMatching(new RegExp(`^${field.replace(/\./g, '\\.')}: `)),
      },
    });
    expect(await count()).toBe(before);
  });

  it.each(['BROADCAST', 'MULTICAST'])(
    'refuses a batch setting on a STREAM subscription with policy %s, creating nothing; takes it with LOAD_BALANCE',
    async (policy) => {
      const before = await count();
      const refused = await create({ protocol: 'STREAM', sink: undefined, config: { policy, batch: {} } });
      expect(refused).toMatchObject({
        status: 400,
        body: {
          code: 'INVALID_REQUEST',
          field: 'config.batch',
          message: expect.stringMatching(/^config\.batch: batch applies to policy LOAD_BALANCE/),
        },
      });
      expect(await count()).toBe(before);
      const created = await create({ protocol: 'STREAM', sink: undefined, config: { batch: { maxEvents: 50 } } });
      expect(created.status).toBe(201);
      expect(created.body.config).toMatchObject({ batch: { maxEvents: 50, maxBytes: 262_144, lingerMs: 0 } });
    },
  );

  it.each(['key', 'none'])(
    'refuses concurrency with batch (ordering %s) on create and replace with 400 naming config.concurrency, changing nothing',
    async (ordering) => {
      const before = await count();
      const refused = await create({ config: { trusted: true, ordering, concurrency: 4, batch: {} } });
      expect(refused).toMatchObject({
        status: 400,
        body: {
          code: 'INVALID_REQUEST',
          field: 'config.concurrency',
          message: expect.stringMatching(/^config\.concurrency: concurrency does not apply with batch/),
        },
      });
      expect(await count()).toBe(before);
      const created = await create({ config: { trusted: true, ordering, batch: { maxEvents: 9 } } });
      expect(created.status).toBe(201);
      const id = String(created.body.id);
      const replaced = await fetch(`${instance.url}/subscriptions/${id}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          sink: 'http://127.0.0.1:9/hook',
          config: { trusted: true, ordering, concurrency: 4, batch: { maxEvents: 7 } },
        }),
      });
      expect(replaced.status).toBe(400);
      expect(await replaced.json()).toMatchObject({ code: 'INVALID_REQUEST', field: 'config.concurrency' });
      expect((await read(id)).config).toMatchObject({ ordering, batch: { maxEvents: 9 } });
      expect((await read(id)).config.concurrency).toBeUndefined();
    },
  );
});

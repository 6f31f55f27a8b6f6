import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { testConfig, uniqueTopic } from '../support/env';

/** `config.ordering` through the gateway (real Postgres): what a create takes, refuses, and a read shows. */
describe('subscription ordering over HTTP (real gateway and Postgres)', () => {
  const topic = uniqueTopic('ordering-api');
  const config = testConfig({ EVENTMESH_KAFKA_TOPICS: topic, EVENTMESH_HTTP_PORT: '0' });
  let instance: RunningInstance;

  beforeAll(async () => {
    instance = await startInstance(config, { roles: ['gateway'] });
  });
  afterAll(() => instance?.close());

  const create = async (config: Record<string, unknown>) => {
    const response = await fetch(`${instance.url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink: 'http://127.0.0.1:9/hook', topic, config: { trusted: true, ...config } }),
    });
    return {
      status: response.status,
      body: (await response.json()) as {
        id?: string;
        code?: string;
        message?: string;
        config?: Record<string, unknown>;
      },
    };
  };
  const read = async (id: string) =>
    (await (await fetch(`${instance.url}/subscriptions/${id}`)).json()) as { config: Record<string, unknown> };

  it('takes key with a concurrency and shows it; shows the default partition when none was given', async () => {
    const keyed = await create({ ordering: 'key', concurrency: 32 });
    expect(keyed.status).toBe(201);
    expect((await read(keyed.body.id!)).config).toMatchObject({ ordering: 'key', concurrency: 32 });
    const plain = await create({});
    expect(plain.status).toBe(201);
    expect((await read(plain.body.id!)).config).toMatchObject({ ordering: 'partition' });
  });

  it('refuses a bad ordering or concurrency with 400 INVALID_REQUEST naming the field', async () => {
    expect(await create({ ordering: 'fifo' })).toEqual({
      status: 400,
      body: expect.objectContaining({
        code: 'INVALID_REQUEST',
        message: 'config.ordering: Invalid option: expected one of "partition"|"key"|"none"',
      }),
    });
    expect(await create({ concurrency: 4 })).toMatchObject({
      status: 400,
      body: { code: 'INVALID_REQUEST', message: expect.stringMatching(/^config\.concurrency: /) },
    });
    expect(await create({ ordering: 'none', concurrency: 1000 })).toMatchObject({
      status: 400,
      body: { code: 'INVALID_REQUEST', message: expect.stringMatching(/^config\.concurrency: /) },
    });
  });
});

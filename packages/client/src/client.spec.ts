import { EventMeshClient } from './client';
import { fakeFetch, Reply } from './testing/fake-fetch';

const view = (id: string, extra: object = {}) => ({
  id,
  topic: 'events',
  protocol: 'STREAM',
  filters: [],
  config: { policy: 'LOAD_BALANCE' },
  instance: 'i',
  status: 'ACTIVE',
  createdAt: 'now',
  ...extra,
});

describe('EventMeshClient', () => {
  it('sends the token the callback gives at each request, and the API key', async () => {
    let n = 0;
    const { fetch, sent } = fakeFetch(() => ({ status: 200, body: [] }));
    const mesh = new EventMeshClient({ url: 'http://mesh/', fetch, token: async () => `t${++n}`, apiKey: 'emk_a_b' });
    await mesh.subscriptions.list();
    await mesh.subscriptions.list();
    expect(sent.map((s) => [s.url, s.headers.authorization, s.headers['x-api-key']])).toEqual([
      ['http://mesh/subscriptions', 'Bearer t1', 'emk_a_b'],
      ['http://mesh/subscriptions', 'Bearer t2', 'emk_a_b'],
    ]);
  });

  it('ensure: one idempotent PUT by name, retried on a reset; byName reads the list by name', async () => {
    const replies: Reply[] = [{ reset: true }, { status: 201, body: view('s1', { name: 'orders' }) }];
    const { fetch, sent } = fakeFetch((req) =>
      req.method === 'GET' ? { status: 200, body: [view('s1', { name: 'orders' })] } : replies.shift()!,
    );
    const mesh = new EventMeshClient({ url: 'http://mesh', fetch, retry: { initialDelayMs: 1 } });
    const spec = { name: 'orders', protocol: 'STREAM' as const, filters: [{ exact: { type: 'a' } }] };
    expect((await mesh.subscriptions.ensure(spec)).id).toBe('s1');
    expect((await mesh.subscriptions.byName('orders'))?.id).toBe('s1');
    expect(sent.map((s) => [s.method, s.url])).toEqual([
      ['PUT', 'http://mesh/subscriptions/by-name/orders'],
      ['PUT', 'http://mesh/subscriptions/by-name/orders'],
      ['GET', 'http://mesh/subscriptions?name=orders'],
    ]);
    expect(JSON.parse(sent[1].body)).toEqual(spec);
  });

  it("ensure: a name another topic's subscription holds is a ConflictError with the runtime's code", async () => {
    const body = { code: 'SUBSCRIPTION_NAME_TAKEN', message: 'subscription name "orders" is taken', field: 'name' };
    const { fetch, sent } = fakeFetch(() => ({ status: 409, body }));
    const mesh = new EventMeshClient({ url: 'http://mesh', fetch });
    await expect(mesh.subscriptions.ensure({ name: 'orders', protocol: 'STREAM' })).rejects.toMatchObject({
      name: 'ConflictError',
      code: 'SUBSCRIPTION_NAME_TAKEN',
      field: 'name',
    });
    expect(sent).toHaveLength(1);
  });

  it('request: not sent again after a reset (a second attempt would be a second request), but after a 503', async () => {
    const replies: Reply[] = [{ reset: true }];
    const { fetch, sent } = fakeFetch(
      () => replies.shift() ?? { status: 200, body: { specversion: '1.0', id: 'r', source: '/s', type: 't' } },
    );
    const mesh = new EventMeshClient({ url: 'http://mesh', fetch, retry: { initialDelayMs: 1 } });
    await expect(mesh.request({ type: 'q', source: '/c', data: 1 })).rejects.toMatchObject({ name: 'ConnectionError' });
    expect(sent).toHaveLength(1);
    replies.push({ status: 503, body: { code: 'OVERLOADED', message: 'busy' } });
    expect((await mesh.request({ type: 'q', source: '/c', data: 1 })).id).toBe('r');
    expect(sent).toHaveLength(3);
  });

  it('publish: binary data of any kind (typed arrays, DataView, ArrayBuffer) goes as data_base64 of its bytes', async () => {
    const { fetch, sent } = fakeFetch(() => ({
      status: 200,
      body: { id: 'x', topic: 'events', partition: 0, offset: '0' },
    }));
    const mesh = new EventMeshClient({ url: 'http://mesh', fetch, topic: 'events' });
    const bytes = new Uint8Array([0, 1, 2, 255, 7, 8]);
    for (const data of [
      bytes.subarray(1, 4),
      new DataView(bytes.buffer, 1, 3),
      bytes.buffer.slice(1, 4),
      new Uint16Array([0x0201, 0xff00]).subarray(0, 1),
    ])
      await mesh.publish({ id: 'b', type: 't', source: '/s', data });
    const sentData = sent.map((s) => {
      const body = JSON.parse(s.body) as { data_base64?: string; data?: unknown };
      return [body.data_base64, body.data];
    });
    expect(sentData).toEqual([
      ['AQL/', undefined],
      ['AQL/', undefined],
      ['AQL/', undefined],
      [Buffer.from(new Uint16Array([0x0201]).buffer).toString('base64'), undefined],
    ]);
  });

  it("reply: carries the request's correlationid", async () => {
    const { fetch, sent } = fakeFetch(() => ({ status: 202, body: { correlationId: 'c1', delivered: true } }));
    const mesh = new EventMeshClient({ url: 'http://mesh', fetch, source: '/responder' });
    const request = { id: 'r', source: '/s', type: 'q', specversion: '1.0', correlationid: 'c1' };
    expect(await mesh.reply(request as never, { type: 'a', data: 1 })).toEqual({
      correlationId: 'c1',
      delivered: true,
    });
    expect(JSON.parse(sent[0].body)).toMatchObject({ type: 'a', source: '/responder', correlationid: 'c1', data: 1 });
  });
});

import { EventMeshClient } from './client';
import { fakeFetch } from './testing/fake-fetch';

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

  it('ensure: finds the subscription with the same spec, else creates one', async () => {
    const { fetch, sent } = fakeFetch((req) =>
      req.method === 'GET'
        ? {
            status: 200,
            body: [
              view('other', { filters: [{ exact: { type: 'b' } }] }),
              view('same', { filters: [{ exact: { type: 'a' } }] }),
            ],
          }
        : { status: 201, body: view('new') },
    );
    const mesh = new EventMeshClient({ url: 'http://mesh', fetch });
    expect((await mesh.subscriptions.ensure({ protocol: 'STREAM', filters: [{ exact: { type: 'a' } }] })).id).toBe(
      'same',
    );
    expect((await mesh.subscriptions.ensure({ protocol: 'STREAM', filters: [{ exact: { type: 'c' } }] })).id).toBe(
      'new',
    );
    expect(sent.map((s) => s.method)).toEqual(['GET', 'GET', 'POST']);
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

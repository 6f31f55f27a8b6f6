import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import Fastify from 'fastify';
import type { AddressInfo } from 'node:net';
import { webhookReceiver, type WebhookRequest } from './webhook';

const key = randomBytes(24);
const secret = `whsec_${key.toString('base64')}`;
const sign = (
  body: string,
  headers: Record<string, string>,
  at = Math.floor(Date.now() / 1000),
  id = `msg_${randomBytes(4).toString('hex')}`,
): WebhookRequest => ({
  method: 'POST',
  headers: {
    ...headers,
    'webhook-id': id,
    'webhook-timestamp': String(at),
    'webhook-signature': `v1,${createHmac('sha256', key).update(`${id}.${at}.${body}`).digest('base64')}`,
  },
  body: Buffer.from(body),
});
const binary = (id: string, data = '{"n":1}') =>
  sign(data, {
    'ce-specversion': '1.0',
    'ce-id': id,
    'ce-source': '/s',
    'ce-type': 't',
    'content-type': 'application/json',
  });

describe('webhookReceiver', () => {
  it('answers the validation handshake for an allowed origin only', async () => {
    const r = webhookReceiver({ secret, handler: () => undefined, allowedOrigins: ['mesh.example'] });
    const ok = await r.receive({
      method: 'OPTIONS',
      headers: { 'webhook-request-origin': 'mesh.example' },
      body: Buffer.alloc(0),
    });
    expect(ok).toMatchObject({ status: 200, headers: { 'webhook-allowed-origin': 'mesh.example' } });
    expect(
      (await r.receive({ method: 'OPTIONS', headers: { 'webhook-request-origin': 'evil' }, body: Buffer.alloc(0) }))
        .status,
    ).toBe(403);
  });

  it('takes binary, structured and batch events with a valid signature', async () => {
    const got: unknown[] = [];
    const r = webhookReceiver({ secret, handler: (e) => void got.push([e.id, e.data]) });
    expect((await r.receive(binary('b1'))).status).toBe(204);
    const structured = JSON.stringify({ specversion: '1.0', id: 's1', source: '/s', type: 't', data: { n: 2 } });
    expect((await r.receive(sign(structured, { 'content-type': 'application/cloudevents+json' }))).status).toBe(204);
    const batch = JSON.stringify(
      [1, 2].map((n) => ({ specversion: '1.0', id: `k${n}`, source: '/s', type: 't', data: { n } })),
    );
    expect((await r.receive(sign(batch, { 'content-type': 'application/cloudevents-batch+json' }))).status).toBe(204);
    expect(got).toEqual([
      ['b1', { n: 1 }],
      ['s1', { n: 2 }],
      ['k1', { n: 1 }],
      ['k2', { n: 2 }],
    ]);
  });

  it('verifies a batch by its one signature and dedupes it per event: a redelivered batch handles only the new ones', async () => {
    const handler = jest.fn();
    const r = webhookReceiver({ secret, handler });
    const batchOf = (ids: string[]) =>
      JSON.stringify(ids.map((id) => ({ specversion: '1.0', id, source: '/s', type: 't', data: { id } })));
    const headers = { 'content-type': 'application/cloudevents-batch+json' };
    const tampered = sign(batchOf(['t1', 't2']), headers);
    tampered.body = Buffer.from(batchOf(['t1', 't3']));
    expect((await r.receive(tampered)).status).toBe(401);
    expect(handler).not.toHaveBeenCalled();
    expect((await r.receive(sign(batchOf(['a1', 'a2']), headers))).status).toBe(204);
    expect((await r.receive(sign(batchOf(['a1', 'a2', 'a3']), headers))).status).toBe(204);
    expect(handler.mock.calls.map(([e]: [{ id: string }]) => e.id)).toEqual(['a1', 'a2', 'a3']);
    expect(r.stats).toMatchObject({ handled: 3, duplicates: 2 });
  });

  it("refuses a wrong signature, another secret's, a missing one and a stale timestamp with 401, calling nothing", async () => {
    const handler = jest.fn();
    const r = webhookReceiver({ secret, handler, toleranceSeconds: 60 });
    const tampered = binary('x1');
    tampered.body = Buffer.from('{"n":2}');
    const other = webhookReceiver({ secret: `whsec_${randomBytes(24).toString('base64')}`, handler });
    const unsigned: WebhookRequest = {
      method: 'POST',
      headers: { 'ce-id': 'x', 'content-type': 'application/json' },
      body: Buffer.from('{}'),
    };
    const stale = sign(
      '{}',
      { 'ce-specversion': '1.0', 'ce-id': 'x2', 'ce-source': '/s', 'ce-type': 't' },
      Math.floor(Date.now() / 1000) - 120,
    );
    for (const [receiver, req] of [
      [r, tampered],
      [other, binary('x3')],
      [r, unsigned],
      [r, stale],
    ] as const) {
      expect((await receiver.receive(req)).status).toBe(401);
    }
    expect(handler).not.toHaveBeenCalled();
  });

  it('accepts the new secret during a rotation', async () => {
    const r = webhookReceiver({
      secret: () => [`whsec_${randomBytes(24).toString('base64')}`, secret],
      handler: () => undefined,
    });
    expect((await r.receive(binary('r1'))).status).toBe(204);
  });

  it('answers a duplicate 2xx without the handler, and a failed one 500 so it comes again and is handled', async () => {
    let calls = 0;
    const r = webhookReceiver({
      secret,
      handler: () => {
        if (++calls === 1) throw new Error('first fails');
      },
    });
    expect((await r.receive(binary('d1'))).status).toBe(500);
    expect((await r.receive(binary('d1'))).status).toBe(204);
    expect((await r.receive(binary('d1'))).status).toBe(204);
    expect(calls).toBe(2);
    expect(r.stats).toMatchObject({ handled: 1, duplicates: 1 });
  });

  it('serves Node http', async () => {
    const got: string[] = [];
    const r = webhookReceiver({ secret, handler: (e) => void got.push(e.id) });
    const server = http.createServer(r.node);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const req = binary('n1');
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {
        method: 'POST',
        headers: req.headers as Record<string, string>,
        body: req.body,
      });
      expect(res.status).toBe(204);
      expect(got).toEqual(['n1']);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('webhookReceiver as a Fastify plugin', () => {
  it("verifies the raw body and hands the event on, beside the app's own JSON routes", async () => {
    const app = Fastify();
    const got: string[] = [];
    const r = webhookReceiver({ secret, handler: (e) => void got.push(e.id) });
    await app.register(r.fastify as never, { path: '/hook' });
    app.post('/echo', async (req) => req.body);
    const req = binary('f1');
    const answer = await app.inject({
      method: 'POST',
      url: '/hook',
      headers: req.headers as Record<string, string>,
      payload: req.body,
    });
    expect(answer.statusCode).toBe(204);
    expect(got).toEqual(['f1']);
    const handshake = await app.inject({
      method: 'OPTIONS',
      url: '/hook',
      headers: { 'webhook-request-origin': 'mesh' },
    });
    expect(handshake.headers['webhook-allowed-origin']).toBe('mesh');
    expect((await app.inject({ method: 'POST', url: '/echo', payload: { a: 1 } })).json()).toEqual({ a: 1 });
    await app.close();
  });
});

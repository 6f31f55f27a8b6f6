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
    for (const [receiver, req, code] of [
      [r, tampered, 'BAD_SIGNATURE'],
      [other, binary('x3'), 'BAD_SIGNATURE'],
      [r, unsigned, 'MISSING_SIGNATURE'],
      [r, stale, 'STALE_TIMESTAMP'],
    ] as const) {
      const answer = await receiver.receive(req);
      expect(answer.status).toBe(401);
      expect(JSON.parse(answer.body!)).toMatchObject({ code });
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

  it('never verifies with an empty key: a static one is refused at once, a callback giving none answers 503', async () => {
    const handler = jest.fn();
    // Signed with an empty key: what anybody can sign.
    const forged = (() => {
      const at = Math.floor(Date.now() / 1000);
      const req = binary('forged');
      req.headers['webhook-timestamp'] = String(at);
      const mac = createHmac('sha256', Buffer.alloc(0)).update(`${req.headers['webhook-id']}.${at}.`).update(req.body);
      req.headers['webhook-signature'] = `v1,${mac.digest('base64')}`;
      return req;
    })();
    for (const empty of ['', 'whsec_', ['whsec_', secret]])
      expect(() => webhookReceiver({ secret: empty, handler })).toThrow(/secret \d is empty/);
    for (const given of [() => '', () => 'whsec_', () => undefined as unknown as string, () => [] as string[]]) {
      const answer = await webhookReceiver({ secret: given, handler }).receive(forged);
      expect(answer.status).toBe(503);
      expect(JSON.parse(answer.body!)).toMatchObject({ code: 'NO_SECRET' });
    }
    const throwing = webhookReceiver({
      secret: () => {
        throw new Error('vault down');
      },
      handler,
    });
    expect(JSON.parse((await throwing.receive(forged)).body!)).toMatchObject({
      code: 'NO_SECRET',
      message: expect.stringContaining('vault down'),
    });
    expect(handler).not.toHaveBeenCalled();
  });

  it('answers, never throws, when the handler throws something that is not an Error', async () => {
    const r = webhookReceiver({
      secret,
      handler: () => {
        throw null;
      },
    });
    const answer = await r.receive(binary('t1'));
    expect(answer).toMatchObject({ status: 500 });
    expect(JSON.parse(answer.body!)).toEqual({ code: 'HANDLER_FAILED', message: 'null' });
  });

  it('refuses an event that is not a valid CloudEvent with 400, whatever its mode, calling nothing', async () => {
    const handler = jest.fn();
    const r = webhookReceiver({ secret, handler, dedupe: false });
    const structured = (body: unknown) =>
      sign(JSON.stringify(body), { 'content-type': 'application/cloudevents+json' });
    for (const req of [
      structured({}),
      structured({ specversion: '1.0', id: 'i', type: 't' }),
      sign('{}', { 'ce-specversion': '1.0', 'ce-id': 'only-id', 'content-type': 'application/json' }),
      sign(JSON.stringify([{ specversion: '1.0', id: 'k', source: '/s', type: 't' }, { id: 'k2' }]), {
        'content-type': 'application/cloudevents-batch+json',
      }),
      sign('{}', { 'ce-specversion': '1.0', 'ce-id': 'x', 'ce-source': '%E0%A4%A', 'ce-type': 't' }),
    ]) {
      const answer = await r.receive(req);
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body!)).toMatchObject({ code: 'INVALID_CLOUDEVENT' });
    }
    expect(handler).not.toHaveBeenCalled();
    expect(r.stats.refused).toBe(5);
  });

  it('hands on what was sent: ce-* headers percent-decoded, binary data as its bytes, no body as no data, any case of the media type', async () => {
    const got: { subject?: string; data: unknown }[] = [];
    const r = webhookReceiver({ secret, handler: (e) => void got.push({ subject: e.subject, data: e.data }) });
    const ce = (id: string, extra: Record<string, string> = {}) => ({
      'ce-specversion': '1.0',
      'ce-id': id,
      'ce-source': '/s',
      'ce-type': 't',
      ...extra,
    });
    const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x80]);
    const signedBytes = (id: string) => {
      const req = sign('', { ...ce(id), 'content-type': 'application/octet-stream' });
      const at = req.headers['webhook-timestamp'];
      const mac = createHmac('sha256', key).update(`${req.headers['webhook-id']}.${at}.`).update(bytes);
      return { ...req, body: bytes, headers: { ...req.headers, 'webhook-signature': `v1,${mac.digest('base64')}` } };
    };
    const answers = [
      await r.receive(
        sign('{}', { ...ce('p1', { 'ce-subject': 'caf%C3%A9%20bar%20100%25' }), 'content-type': 'application/json' }),
      ),
      await r.receive(signedBytes('p2')),
      await r.receive(
        sign(
          JSON.stringify({
            specversion: '1.0',
            id: 'p3',
            source: '/s',
            type: 't',
            data_base64: bytes.toString('base64'),
          }),
          {
            'Content-Type': 'Application/CloudEvents+JSON;charset=UTF-8',
          },
        ),
      ),
      await r.receive(sign('', ce('p4'))),
      await r.receive(sign('héllo', { ...ce('p5'), 'content-type': 'text/plain; charset=utf-8' })),
    ];
    expect(answers.map((a) => a.status)).toEqual([204, 204, 204, 204, 204]);
    expect(got[0]).toEqual({ subject: 'café bar 100%', data: {} });
    expect(Buffer.from(got[1].data as Uint8Array)).toEqual(bytes);
    expect(got[2].data).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(got[2].data as Uint8Array)).toEqual(bytes);
    expect(got[3].data).toBeUndefined();
    expect(got[4].data).toBe('héllo');
  });

  it('takes header names in any case, and refuses the handshake with a machine-readable body', async () => {
    const r = webhookReceiver({ secret, handler: () => undefined, allowedOrigins: ['mesh.example'] });
    const req = binary('h1');
    const shouted = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k.toUpperCase(), v]));
    expect((await r.receive({ ...req, headers: shouted })).status).toBe(204);
    const missing = await r.receive({ method: 'OPTIONS', headers: {}, body: Buffer.alloc(0) });
    const denied = await r.receive({
      method: 'OPTIONS',
      headers: { 'WebHook-Request-Origin': 'evil' },
      body: Buffer.alloc(0),
    });
    expect([missing.status, JSON.parse(missing.body!).code]).toEqual([400, 'MISSING_ORIGIN']);
    expect([denied.status, JSON.parse(denied.body!).code]).toEqual([403, 'ORIGIN_NOT_ALLOWED']);
  });

  it('refuses settings that would turn a check off: a tolerance or body limit that is no number', () => {
    for (const toleranceSeconds of [NaN, -1, Infinity])
      expect(() => webhookReceiver({ secret, handler: () => undefined, toleranceSeconds })).toThrow(/toleranceSeconds/);
    for (const maxBodyBytes of [0, 1.5, NaN])
      expect(() => webhookReceiver({ secret, handler: () => undefined, maxBodyBytes })).toThrow(/maxBodyBytes/);
  });

  it('answers a body past maxBodyBytes 413 before reading it through, over Node http', async () => {
    const handler = jest.fn();
    const r = webhookReceiver({ secret, handler, maxBodyBytes: 1024 });
    const server = http.createServer(r.node);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    try {
      const req = binary('big', JSON.stringify({ pad: 'x'.repeat(4096) }));
      const declared = await fetch(url, {
        method: 'POST',
        headers: req.headers as Record<string, string>,
        body: req.body,
      });
      expect(declared.status).toBe(413);
      expect(await declared.json()).toMatchObject({ code: 'BODY_TOO_LARGE' });
      // Sent in chunks with no length given: refused as its size passes the limit.
      const chunked = await fetch(url, {
        method: 'POST',
        headers: req.headers as Record<string, string>,
        body: new ReadableStream({
          start(controller) {
            for (let i = 0; i < 8; i++) controller.enqueue(new Uint8Array(512));
            controller.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
      expect(chunked.status).toBe(413);
      expect(handler).not.toHaveBeenCalled();
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
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
    // Fastify's own text and JSON parsers would hand on a decoded body, not the bytes signed.
    for (const contentType of ['text/plain', 'text/plain; charset=utf-8', 'application/json']) {
      const text = sign('héllo "x"', {
        'ce-specversion': '1.0',
        'ce-id': `t-${contentType}`,
        'ce-source': '/s',
        'ce-type': 't',
        'content-type': contentType,
      });
      const answerOf = await app.inject({
        method: 'POST',
        url: '/hook',
        headers: text.headers as Record<string, string>,
        payload: text.body,
      });
      expect([contentType, answerOf.statusCode]).toEqual([contentType, contentType === 'application/json' ? 400 : 204]);
    }
    await app.close();
  });
});

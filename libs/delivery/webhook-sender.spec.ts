import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import type { EventFrame } from '../frame';
import { waitFor } from '../../test/support/wait-for';
import { WebhookSender } from './webhook-sender';

/** The webhook sender against a local HTTP sink: signatures the official library accepts, and each kind of answer. */
describe('WebhookSender', () => {
  let server: Server;
  let sink: string;
  let answer: (res: import('node:http').ServerResponse) => void = (res) => res.writeHead(200).end();
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];
  const sender = new WebhookSender(300);
  const secret = `whsec_${Buffer.from('a 24 byte signing secret').toString('base64')}`;
  const frame: EventFrame = {
    id: 'evt-1',
    source: '/orders',
    type: 'order.created',
    specversion: '1.0',
    datacontenttype: 'application/json',
    extensions: { partitionkey: 'o-1' },
    data: Buffer.from('{"total":12}'),
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
        answer(res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    sink = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    await sender.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('sends the event in binary mode, signed so the Standard Webhooks library verifies it', async () => {
    answer = (res) => res.writeHead(204).end();
    expect(await sender.send({ sink, signingSecret: secret }, frame, 'msg-1')).toEqual({ ok: true, status: 204 });
    const { headers, body } = received.at(-1)!;
    expect(headers).toMatchObject({ 'ce-id': 'evt-1', 'ce-type': 'order.created', 'ce-partitionkey': 'o-1', 'content-type': 'application/json' });
    expect(body).toBe('{"total":12}');
    const verified = new Webhook(secret).verify(body, {
      'webhook-id': String(headers['webhook-id']),
      'webhook-timestamp': String(headers['webhook-timestamp']),
      'webhook-signature': String(headers['webhook-signature']),
    });
    expect(verified).toEqual({ total: 12 });
    expect(() =>
      new Webhook(secret).verify(`${body} `, {
        'webhook-id': String(headers['webhook-id']),
        'webhook-timestamp': String(headers['webhook-timestamp']),
        'webhook-signature': String(headers['webhook-signature']),
      }),
    ).toThrow();
  });

  it('reports 410 as gone and 503 with Retry-After as a pause', async () => {
    answer = (res) => res.writeHead(410).end();
    expect(await sender.send({ sink, signingSecret: null }, frame, 'msg-2')).toMatchObject({ ok: false, status: 410, gone: true });
    answer = (res) => res.writeHead(503, { 'retry-after': '7' }).end();
    expect(await sender.send({ sink, signingSecret: null }, frame, 'msg-3')).toMatchObject({ ok: false, status: 503, retryAfterMs: 7000 });
  });

  it('gives up on a sink that does not answer within the timeout', async () => {
    answer = () => undefined;
    const started = Date.now();
    const result = await sender.send({ sink, signingSecret: null }, frame, 'msg-4');
    expect(result).toEqual({ ok: false, error: 'no answer within 300 ms' });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('stops at once when its delivery is aborted, long before its timeout', async () => {
    // A sender whose timeout is far away: an abort that is not honoured would end only at the timeout.
    const patient = new WebhookSender(30_000);
    answer = () => undefined;
    const abort = new AbortController();
    const before = received.length;
    try {
      const sending = patient.send({ sink, signingSecret: null }, frame, 'msg-5', abort.signal);
      // Aborted while the sink holds the request: the send is in flight, not refused before it started.
      await waitFor('the sink to hold the request', () => received.length > before, { timeoutMs: 5000, intervalMs: 5 });
      const abortedAt = Date.now();
      abort.abort();
      const result = await Promise.race([
        sending,
        new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), 1000).unref()),
      ]);
      expect(result).toMatchObject({ ok: false, error: expect.stringMatching(/abort/i) });
      expect(Date.now() - abortedAt).toBeLessThan(1000);
    } finally {
      await patient.close();
    }
  });
});

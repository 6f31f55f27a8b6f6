import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { Webhook } from 'standardwebhooks';
import type { EventFrame } from '@libs/frame';
import { SecretBox, SinkGuard, SinkResolver } from '@libs/security';
import { waitFor } from '../../test/support/wait-for';
import { WebhookSender } from './webhook-sender';

/** The webhook sender against a local HTTP sink: signatures the official library accepts, and each kind of answer. */
describe('WebhookSender', () => {
  let server: Server;
  let sink: string;
  let answer: (res: import('node:http').ServerResponse) => void = (res) => res.writeHead(200).end();
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];
  const box = new SecretBox([{ id: 'k1', key: randomBytes(32) }], 'k1');
  const guard = { secrets: box, sinks: new SinkGuard(['loopback']) };
  const sender = new WebhookSender(300, guard);
  const secret = `whsec_${Buffer.from('a 24 byte signing secret').toString('base64')}`;
  /** The secret as the subscriptions table holds it. */
  const sealed = box.seal(secret);
  const frame: EventFrame = {
    id: 'evt-1',
    source: '/orders',
    type: 'order.created',
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
    expect(await sender.send({ sink, signingSecret: sealed }, frame, 'msg-1')).toEqual({ ok: true, status: 204 });
    const { headers, body } = received.at(-1)!;
    expect(headers).toMatchObject({
      'ce-id': 'evt-1',
      'ce-type': 'order.created',
      'ce-partitionkey': 'o-1',
      'content-type': 'application/json',
    });
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

  it("continues the event's trace: its own traceparent and tracestate, or the delivery span's context when given", async () => {
    answer = (res) => res.writeHead(200).end();
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const traced = { ...frame, extensions: { ...frame.extensions, traceparent, tracestate: 'congo=1' } };
    await sender.send({ sink, signingSecret: null }, traced, 'msg-t1');
    expect(received.at(-1)!.headers).toMatchObject({
      traceparent,
      tracestate: 'congo=1',
      'ce-traceparent': traceparent,
    });
    const span = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01' };
    await sender.send({ sink, signingSecret: null }, traced, 'msg-t2', undefined, span);
    expect(received.at(-1)!.headers).toMatchObject({ traceparent: span.traceparent, 'ce-traceparent': traceparent });
    // An event without one (or with a malformed one, written to Kafka by another producer) sends none.
    await sender.send({ sink, signingSecret: null }, { ...frame, extensions: { traceparent: 'garbage' } }, 'msg-t3');
    expect(received.at(-1)!.headers.traceparent).toBeUndefined();
  });

  it('reports 410 as gone and 503 with Retry-After as a pause', async () => {
    answer = (res) => res.writeHead(410).end();
    expect(await sender.send({ sink, signingSecret: null }, frame, 'msg-2')).toMatchObject({
      ok: false,
      status: 410,
      gone: true,
    });
    answer = (res) => res.writeHead(503, { 'retry-after': '7' }).end();
    expect(await sender.send({ sink, signingSecret: null }, frame, 'msg-3')).toMatchObject({
      ok: false,
      status: 503,
      retryAfterMs: 7000,
    });
  });

  it('gives up on a sink that does not answer within the timeout', async () => {
    answer = () => undefined;
    const started = Date.now();
    const result = await sender.send({ sink, signingSecret: null }, frame, 'msg-4');
    expect(result).toEqual({ ok: false, error: 'no answer within 300 ms' });
    // The promise is the timeout itself, and the answer names it. undici checks its timeouts on a clock of about a
    // second's resolution, so this one ends about 1 s in; the bound leaves 4 s more for a loaded 2-core host's
    // timers to run late, and still fails a sender that waited by any other clock than its 300 ms one.
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('stops at once when its delivery is aborted, long before its timeout', async () => {
    // A sender whose timeout is far away: an abort that is not honoured would end only at the timeout.
    const patient = new WebhookSender(30_000, guard);
    answer = () => undefined;
    const abort = new AbortController();
    const before = received.length;
    try {
      const sending = patient.send({ sink, signingSecret: null }, frame, 'msg-5', abort.signal);
      // Aborted while the sink holds the request: the send is in flight, not refused before it started.
      await waitFor('the sink to hold the request', () => received.length > before, { timeoutMs: 5000, intervalMs: 5 });
      abort.abort();
      // Ended by the abort: its answer says so, and it comes before a deadline that means "hung" (3 s: hundreds of
      // times what it takes, a tenth of the sender's timeout), where a send that ignored the abort would wait for
      // the timeout (30 s) and answer "no answer within 30000 ms".
      const result = await Promise.race([
        sending,
        new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), 3000).unref()),
      ]);
      expect(result).toMatchObject({ ok: false, error: expect.stringMatching(/abort/i) });
    } finally {
      await patient.close();
    }
  });

  it('ends every send in flight on one signal when it aborts, with one listener on it however many they are', async () => {
    const patient = new WebhookSender(30_000, guard);
    answer = () => undefined;
    const abort = new AbortController();
    const before = received.length;
    try {
      const sending = [1, 2, 3].map((n) =>
        patient.send({ sink, signingSecret: null }, frame, `msg-s${n}`, abort.signal),
      );
      await waitFor('the sink to hold the three requests', () => received.length >= before + 3, {
        timeoutMs: 5000,
        intervalMs: 5,
      });
      expect(getEventListeners(abort.signal, 'abort')).toHaveLength(1);
      abort.abort();
      // As above: a deadline that means "hung", a tenth of the 30 s timeout a send ignoring the abort waits for.
      const results = await Promise.race([
        Promise.all(sending),
        new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), 3000).unref()),
      ]);
      expect(results).toEqual(
        [1, 2, 3].map(() => expect.objectContaining({ ok: false, error: expect.stringMatching(/abort/i) })),
      );
      // A signal that has aborted already: the send is refused before anything is written.
      const after = received.length;
      expect(await patient.send({ sink, signingSecret: null }, frame, 'msg-s4', abort.signal)).toMatchObject({
        ok: false,
        error: expect.stringMatching(/abort/i),
      });
      expect(received.length).toBe(after);
    } finally {
      await patient.close();
    }
  });

  it('never follows a redirect: a 3xx is a failed delivery, the place it points at gets nothing', async () => {
    let elsewhere = 0;
    const other = createServer((_, res) => {
      elsewhere++;
      res.writeHead(200).end();
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const location = `http://127.0.0.1:${(other.address() as AddressInfo).port}/elsewhere`;
      answer = (res) => res.writeHead(307, { location }).end();
      expect(await sender.send({ sink, signingSecret: null }, frame, 'msg-6')).toMatchObject({
        ok: false,
        status: 307,
      });
      expect(elsewhere).toBe(0);
    } finally {
      other.closeAllConnections();
      await new Promise((r) => other.close(r));
    }
  });

  it('refuses at connect time a sink whose name now resolves to the metadata service: no connection, no request', async () => {
    const rebound: SinkResolver = async () => [{ address: '169.254.169.254', family: 4 }];
    const attempts: string[] = [];
    const guarded = new SinkGuard(['loopback'], rebound);
    // A spy in place of undici's connector: it counts connection attempts and makes none.
    const spying = Object.assign(Object.create(guarded) as SinkGuard, {
      agent: (options: object) =>
        guarded.agent(options, (o, callback) => {
          attempts.push(o.hostname);
          callback(new Error('spy: no connection'), null);
        }),
    });
    const rebinding = new WebhookSender(300, { secrets: box, sinks: spying });
    try {
      const before = received.length;
      const result = await rebinding.send(
        { sink: `http://hooks.example.test:${new URL(sink).port}/hook`, signingSecret: sealed },
        frame,
        'msg-7',
      );
      expect(result).toMatchObject({ ok: false, error: expect.stringContaining('cloud-metadata') });
      expect(attempts).toEqual([]);
      expect(received.length).toBe(before);
    } finally {
      await rebinding.close();
    }
  });

  it('never sends unsigned: a secret that does not open fails the delivery', async () => {
    const before = received.length;
    const foreign = new SecretBox([{ id: 'gone', key: randomBytes(32) }], 'gone').seal(secret);
    expect(await sender.send({ sink, signingSecret: foreign }, frame, 'msg-8')).toMatchObject({
      ok: false,
      error: expect.stringContaining('sealed with key "gone"'),
    });
    expect(received.length).toBe(before);
  });
});

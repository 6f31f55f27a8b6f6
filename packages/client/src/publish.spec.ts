import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CloudEvent } from 'cloudevents';
import { EventMeshClient } from './client';
import { AuthError, ConnectionError, PayloadTooLargeError, UnavailableError, ValidationError } from './errors';
import { fakeFetch, type SentRequest } from './testing/fake-fetch';

const ok = (req: SentRequest) => {
  const body: unknown = JSON.parse(req.body);
  const result = (e: { id: string }, i: number) => ({ id: e.id, topic: 't', partition: 0, offset: i });
  return { status: 202, body: Array.isArray(body) ? { results: body.map(result) } : result(body as { id: string }, 0) };
};
const client = (f: typeof fetch, extra: object = {}) =>
  new EventMeshClient({ url: 'http://mesh', fetch: f, retry: { initialDelayMs: 1, maxDelayMs: 2 }, ...extra });
const ids = (req: SentRequest): string[] => ([] as { id: string }[]).concat(JSON.parse(req.body)).map((e) => e.id);

/** A `GET /limits` answer: the runtime takes `events` and `bytes` in one publish. */
const limitsOf = (events: number, bytes: number) => () => ({
  status: 200,
  body: {
    tenant: 'default',
    maxBodyBytes: bytes,
    maxBatchEvents: events,
    burst: null,
    maxPublish: { events, bytes },
  },
});

/** A fetch that holds each publish (its events' ids in `held`) until its `go` is called, then answers it. */
function heldFetch(): { held: { ids: string[]; go: () => void }[]; slow: typeof fetch } {
  const held: { ids: string[]; go: () => void }[] = [];
  const { fetch: inner } = fakeFetch(ok);
  const slow = ((url: string, init: RequestInit) =>
    url.endsWith('/limits')
      ? inner(url, init)
      : new Promise<void>((go) => held.push({ ids: ids({ body: String(init.body) } as SentRequest), go })).then(() =>
          inner(url, init),
        )) as typeof fetch;
  return { held, slow };
}

const events = (n: number, data = '') =>
  Array.from({ length: n }, (_, i) => ({ id: `e${i + 1}`, source: '/s', type: 't', data }));

describe('publish', () => {
  it('gives an event without an id a fresh one, and keeps one it has', async () => {
    const { fetch, sent } = fakeFetch(ok);
    const r = await client(fetch).publish({ source: '/s', type: 't' });
    await client(fetch).publish(new CloudEvent({ id: 'mine', source: '/s', type: 't' }));
    expect(r.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(sent[0].body)).toMatchObject({ id: r.id, specversion: '1.0', source: '/s', type: 't' });
    expect(ids(sent[1])).toEqual(['mine']);
    expect(sent[0].headers['content-type']).toBe('application/cloudevents+json');
  });

  it('shares one batch request between publishes of the same tick, each caller getting its own result', async () => {
    const { fetch, sent } = fakeFetch(ok);
    const mesh = client(fetch);
    const results = await Promise.all(['a', 'b', 'c'].map((id) => mesh.publish({ id, source: '/s', type: 't' })));
    expect(sent).toHaveLength(1);
    expect(sent[0].headers['content-type']).toBe('application/cloudevents-batch+json');
    expect(results.map((r) => r.id)).toEqual(['a', 'b', 'c']);
  });

  it('cuts batches at maxBatchEvents and maxBatchBytes', async () => {
    const { fetch, sent } = fakeFetch(ok);
    const byCount = client(fetch, { publish: { maxBatchEvents: 2 } });
    await byCount.publishMany([1, 2, 3, 4, 5].map((n) => ({ id: `e${n}`, source: '/s', type: 't' })));
    expect(sent.map(ids)).toEqual([['e1', 'e2'], ['e3', 'e4'], ['e5']]);
    sent.length = 0;
    const byBytes = client(fetch, { publish: { maxBatchBytes: 300 } });
    await byBytes.publishMany([1, 2, 3].map((n) => ({ id: `b${n}`, source: '/s', type: 't', data: 'x'.repeat(80) })));
    expect(sent.map(ids)).toEqual([['b1', 'b2'], ['b3']]);
    for (const req of sent) expect(Buffer.byteLength(req.body)).toBeLessThanOrEqual(300);
  });

  it('retries 503 (maybeWritten), 429 with Retry-After and a connection reset with the same ids, then succeeds', async () => {
    const { fetch, sent } = fakeFetch([
      { status: 503, body: { code: 'KAFKA_UNAVAILABLE', maybeWritten: true }, headers: { 'retry-after': '0' } },
      { status: 429, body: { code: 'QUOTA_EXCEEDED' }, headers: { 'retry-after': '0' } },
      { reset: true },
      { status: 202, body: { id: 'x', topic: 't', partition: 1, offset: 9 } },
    ]);
    const r = await client(fetch).publish({ id: 'x', source: '/s', type: 't' });
    expect(r).toEqual({ id: 'x', topic: 't', partition: 1, offset: 9 });
    expect(sent.map((s) => s.body)).toEqual(Array(4).fill(sent[0].body));
  });

  it('gives up after maxAttempts with the last typed error', async () => {
    const { fetch, sent } = fakeFetch(() => ({
      status: 503,
      body: { code: 'OVERLOADED', message: 'full', limit: 'producerQueue' },
    }));
    const failure = client(fetch, { retry: { maxAttempts: 3, initialDelayMs: 1 } }).publish({
      source: '/s',
      type: 't',
    });
    await expect(failure).rejects.toBeInstanceOf(UnavailableError);
    await expect(failure).rejects.toMatchObject({ code: 'OVERLOADED', status: 503, body: { limit: 'producerQueue' } });
    expect(sent).toHaveLength(3);
    const { fetch: down } = fakeFetch(() => ({ reset: true }));
    await expect(
      client(down, { retry: { maxAttempts: 2, initialDelayMs: 1 } }).publish({ source: '/s', type: 't' }),
    ).rejects.toBeInstanceOf(ConnectionError);
  });

  it("never retries another 4xx or a 429 without Retry-After, and surfaces the runtime's body", async () => {
    const { fetch, sent } = fakeFetch([
      {
        status: 400,
        body: { code: 'INVALID_CLOUDEVENT', message: 'type is required', attribute: 'type', field: 'type' },
      },
      { status: 401, body: { code: 'UNAUTHENTICATED', message: 'no token' } },
      { status: 403, body: { code: 'FORBIDDEN', message: 'no grant' } },
      { status: 429, body: { code: 'TOO_MANY_CONSUMERS', message: 'full' } },
    ]);
    const mesh = client(fetch);
    await expect(mesh.publish({ source: '/s' })).rejects.toMatchObject({
      name: 'ValidationError',
      code: 'INVALID_CLOUDEVENT',
      field: 'type',
      status: 400,
    });
    await expect(mesh.publish({ source: '/s', type: 't' })).rejects.toBeInstanceOf(AuthError);
    await expect(mesh.publish({ source: '/s', type: 't' })).rejects.toMatchObject({
      name: 'AuthError',
      code: 'FORBIDDEN',
      status: 403,
    });
    await expect(mesh.publish({ source: '/s', type: 't' })).rejects.toMatchObject({ code: 'TOO_MANY_CONSUMERS' });
    expect(sent).toHaveLength(4);
  });

  it("fails only the event a batch's 400 names, and sends the others again", async () => {
    const { fetch, sent } = fakeFetch((req) =>
      ids(req).includes('bad')
        ? { status: 400, body: { code: 'INVALID_CLOUDEVENT', index: ids(req).indexOf('bad') } }
        : ok(req),
    );
    const mesh = client(fetch);
    const outcomes = await Promise.allSettled(
      ['a', 'bad', 'c'].map((id) => mesh.publish({ id, source: '/s', type: 't' })),
    );
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(ValidationError);
    expect(sent.map(ids)).toEqual([
      ['a', 'bad', 'c'],
      ['a', 'c'],
    ]);
  });

  it('waits for room when maxEventsInFlight events are unanswered', async () => {
    const { held, slow } = heldFetch();
    const mesh = client(slow, { publish: { maxEventsInFlight: 2 } });
    const all = ['a', 'b', 'c'].map((id) => mesh.publish({ id, source: '/s', type: 't' }));
    await new Promise((r) => setTimeout(r, 20));
    expect(held.map((h) => h.ids)).toEqual([['a', 'b']]);
    held[0].go();
    await Promise.all(all.slice(0, 2));
    await new Promise((r) => setTimeout(r, 20));
    expect(held.map((h) => h.ids)).toEqual([['a', 'b'], ['c']]);
    held[1].go();
    expect((await all[2]).id).toBe('c');
  });

  it('waits for room when maxBytesInFlight bytes are unanswered, and lets one larger event through alone', async () => {
    const { held, slow } = heldFetch();
    const event = (id: string, size: number) => ({ id, source: '/s', type: 't', data: 'x'.repeat(size) });
    const mesh = client(slow, { publish: { maxBytesInFlight: 400 } });
    // About 150 bytes of JSON each: two fit in 400, the third waits; then one of 1000 bytes, alone.
    const all = [event('a', 80), event('b', 80), event('c', 80), event('big', 1000)].map((e) => mesh.publish(e));
    await new Promise((r) => setTimeout(r, 20));
    expect(held.map((h) => h.ids)).toEqual([['a', 'b']]);
    held[0].go();
    await new Promise((r) => setTimeout(r, 20));
    expect(held.map((h) => h.ids)).toEqual([['a', 'b'], ['c']]);
    held[1].go();
    await new Promise((r) => setTimeout(r, 20));
    expect(held.map((h) => h.ids)).toEqual([['a', 'b'], ['c'], ['big']]);
    held[2].go();
    expect((await Promise.all(all)).map((r) => r.id)).toEqual(['a', 'b', 'c', 'big']);
  });

  it('publishMany takes events from its iterable only as room in flight frees, and answers each in order', async () => {
    const { held, slow } = heldFetch();
    const mesh = client(slow, { publish: { maxEventsInFlight: 2 } });
    const taken: string[] = [];
    function* events() {
      for (const id of ['a', 'b', 'c', 'd', 'e']) {
        taken.push(id);
        yield { id, source: '/s', type: 't' };
      }
    }
    const all = mesh.publishMany(events());
    await new Promise((r) => setTimeout(r, 20));
    // Two in flight, the third taken and waiting for room: the rest not yet read.
    expect({ taken, held: held.map((h) => h.ids) }).toEqual({ taken: ['a', 'b', 'c'], held: [['a', 'b']] });
    held[0].go();
    await new Promise((r) => setTimeout(r, 20));
    expect({ taken, held: held.map((h) => h.ids) }).toEqual({
      taken: ['a', 'b', 'c', 'd', 'e'],
      held: [
        ['a', 'b'],
        ['c', 'd'],
      ],
    });
    held[1].go();
    await new Promise((r) => setTimeout(r, 20));
    held[2].go();
    expect((await all).map((r) => r.id)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('publishMany ordered: its requests one at a time, in order, cut at the bounds, never shared with another publish', async () => {
    const { held, slow } = heldFetch();
    const mesh = client(slow, { publish: { maxBatchBytes: 300 } });
    // About 150 bytes of JSON each: two to a request.
    const events = ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id, source: '/s', type: 't', data: 'x'.repeat(80) }));
    const all = mesh.publishMany(events, { ordered: true });
    const other = mesh.publish({ id: 'x', source: '/s', type: 't' });
    const settle = () => new Promise((r) => setTimeout(r, 20));
    await settle();
    expect(held.map((h) => h.ids)).toEqual([['a', 'b'], ['x']]);
    held[0].go();
    await settle();
    expect(held.map((h) => h.ids)).toEqual([['a', 'b'], ['x'], ['c', 'd']]);
    held[2].go();
    await settle();
    expect(held.map((h) => h.ids)).toEqual([['a', 'b'], ['x'], ['c', 'd'], ['e']]);
    held[3].go();
    expect((await all).map((r) => r.id)).toEqual(['a', 'b', 'c', 'd', 'e']);
    held[1].go();
    expect((await other).id).toBe('x');
  });

  it('publishMany ordered: a request refused sends nothing after it, and one refused for its size is not cut again', async () => {
    const { fetch, sent } = fakeFetch((req) =>
      ids(req).includes('c') ? { status: 413, body: { code: 'PAYLOAD_TOO_LARGE' } } : ok(req),
    );
    const mesh = client(fetch, { publish: { maxBatchEvents: 2 } });
    const events = ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id, source: '/s', type: 't' }));
    await expect(mesh.publishMany(events, { ordered: true })).rejects.toBeInstanceOf(PayloadTooLargeError);
    await new Promise((r) => setTimeout(r, 20));
    expect(sent.map(ids)).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ]);
    // The runtime lowered its bounds (10 events, now 1): an unordered call's batch is cut to them and sent again side
    // by side; an ordered one fails, and its caller decides (one at a time keeps the order).
    let reported = 10;
    const lowered = fakeFetch(
      (req) => (ids(req).length > reported ? { status: 413, body: { code: 'PAYLOAD_TOO_LARGE' } } : ok(req)),
      () => limitsOf(reported, 1 << 20)(),
    );
    const meshLowered = client(lowered.fetch);
    await meshLowered.publish({ source: '/s', type: 't' });
    reported = 1;
    lowered.sent.length = 0;
    await expect(meshLowered.publishMany(events, { ordered: true })).rejects.toBeInstanceOf(PayloadTooLargeError);
    await new Promise((r) => setTimeout(r, 20));
    expect(lowered.sent.map(ids)).toEqual([['a', 'b', 'c', 'd', 'e']]);
  });

  it('sends traceparent with the call and the topic as a query parameter', async () => {
    const { fetch, sent } = fakeFetch(ok);
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await client(fetch).publish({ source: '/s', type: 't' }, { topic: 'orders', traceparent });
    expect(sent[0].headers.traceparent).toBe(traceparent);
    expect(new URL(sent[0].url).searchParams.get('topic')).toBe('orders');
  });

  it('retries, with the same body, a publish whose connection a real server reset before answering', async () => {
    const bodies: string[] = [];
    const server = http.createServer((req, res) => {
      if (req.url === '/limits') return res.writeHead(404).end();
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        bodies.push(body);
        if (bodies.length === 1) return req.socket.destroy();
        res
          .writeHead(202, { 'content-type': 'application/json' })
          .end(JSON.stringify({ id: 'r1', topic: 't', partition: 0, offset: 1 }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const mesh = new EventMeshClient({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        retry: { initialDelayMs: 1 },
      });
      expect(await mesh.publish({ id: 'r1', source: '/s', type: 't' })).toMatchObject({ id: 'r1', offset: 1 });
      expect(bodies).toHaveLength(2);
      expect(bodies[1]).toBe(bodies[0]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  describe("the runtime's limits (GET /limits)", () => {
    const events = (n: number, data = '') =>
      Array.from({ length: n }, (_, i) => ({ id: `e${i + 1}`, source: '/s', type: 't', data }));

    it('reads them once, at the first publish, and cuts batches to them below the options', async () => {
      const { fetch, sent, limitReads } = fakeFetch(ok, limitsOf(3, 100000));
      const mesh = client(fetch, { publish: { maxBatchEvents: 1000, maxBatchBytes: 1 << 20 } });
      expect(limitReads).toHaveLength(0);
      await mesh.publishMany(events(7));
      expect(sent.map(ids)).toEqual([['e1', 'e2', 'e3'], ['e4', 'e5', 'e6'], ['e7']]);
      await Promise.all([mesh.publishMany(events(2)), mesh.publish({ source: '/s', type: 't' })]);
      expect(limitReads).toHaveLength(1);
      sent.length = 0;
      const { fetch: small, sent: cut } = fakeFetch(ok, limitsOf(100, 300));
      await client(small).publishMany(events(3, 'x'.repeat(80)));
      expect(cut.map(ids)).toEqual([['e1', 'e2'], ['e3']]);
      for (const req of cut) expect(Buffer.byteLength(req.body)).toBeLessThanOrEqual(300);
    });

    it('keeps the smaller of the options and the limits', async () => {
      const { fetch, sent } = fakeFetch(ok, limitsOf(100, 1 << 20));
      await client(fetch, { publish: { maxBatchEvents: 2 } }).publishMany(events(3));
      expect(sent.map(ids)).toEqual([['e1', 'e2'], ['e3']]);
    });

    it.each([
      ['413 BATCH_EXCEEDS_BURST', { status: 413, body: { code: 'BATCH_EXCEEDS_BURST', maxBatchEvents: 4 } }],
      ['413 PAYLOAD_TOO_LARGE', { status: 413, body: { code: 'PAYLOAD_TOO_LARGE' } }],
      ['400 over the batch count', { status: 400, body: { code: 'INVALID_CLOUDEVENT', limit: 4 } }],
    ])(
      'reads them again after a %s, and sends the refused batch split to them: each event published once',
      async (_, refusal) => {
        // The runtime took 10 at the first read, 4 since (an operator lowered the tenant's burst).
        let reported = 10;
        const accepted: string[] = [];
        const { fetch, sent, limitReads } = fakeFetch(
          (req) => (ids(req).length > 4 ? refusal : (accepted.push(...ids(req)), ok(req))),
          () => limitsOf(reported, 1 << 20)(),
        );
        const mesh = client(fetch);
        await mesh.publish({ source: '/s', type: 't' });
        reported = 4;
        accepted.length = 0;
        sent.length = 0;
        const results = await mesh.publishMany(events(10));
        expect(results.map((r) => r.id)).toEqual(events(10).map((e) => e.id));
        expect(sent.map((r) => ids(r).length)).toEqual([10, 4, 4, 2]);
        expect(accepted).toEqual(events(10).map((e) => e.id));
        expect(limitReads).toHaveLength(2);
      },
    );

    it('fails a batch refused for its size within the bounds read again, without sending it again', async () => {
      const { fetch, sent, limitReads } = fakeFetch(
        () => ({ status: 413, body: { code: 'PAYLOAD_TOO_LARGE' } }),
        limitsOf(10, 1 << 20),
      );
      const mesh = client(fetch);
      await expect(mesh.publishMany(events(5))).rejects.toBeInstanceOf(PayloadTooLargeError);
      expect({ sent: sent.length, limitReads: limitReads.length }).toEqual({ sent: 1, limitReads: 2 });
    });
  });

  describe('timeouts, options, Retry-After and close', () => {
    /** A real server on 127.0.0.1 port 0: the first `hang` publishes are never answered, the others are. */
    async function hangingServer(hang: number) {
      const bodies: string[] = [];
      const server = http.createServer((req, res) => {
        if (req.url === '/limits') return res.writeHead(404).end();
        let body = '';
        req.on('data', (c: Buffer) => (body += c.toString()));
        req.on('end', () => {
          bodies.push(body);
          if (bodies.length <= hang) return; // never answered
          const { id } = JSON.parse(body) as { id: string };
          res
            .writeHead(202, { 'content-type': 'application/json' })
            .end(JSON.stringify({ id, topic: 't', partition: 0, offset: 1 }));
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const stop = async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      };
      return { bodies, url, stop };
    }

    it('times out an attempt a hung server never answers, and retries it with the same body', async () => {
      const server = await hangingServer(1);
      try {
        const mesh = new EventMeshClient({
          url: server.url,
          retry: { initialDelayMs: 1, attemptTimeoutMs: 200 } as object,
        });
        expect(await mesh.publish({ id: 'h1', source: '/s', type: 't' })).toMatchObject({ id: 'h1', offset: 1 });
        expect(server.bodies).toHaveLength(2);
        expect(server.bodies[1]).toBe(server.bodies[0]);
      } finally {
        await server.stop();
      }
    }, 3000);

    it('fails a publish a hung server never answers with a ConnectionError TIMEOUT once the attempts run out', async () => {
      const server = await hangingServer(Infinity);
      try {
        const mesh = new EventMeshClient({
          url: server.url,
          retry: { maxAttempts: 2, initialDelayMs: 1, attemptTimeoutMs: 100 } as object,
        });
        await expect(mesh.publish({ source: '/s', type: 't' })).rejects.toMatchObject({
          name: 'ConnectionError',
          code: 'TIMEOUT',
        });
        expect(server.bodies).toHaveLength(2);
      } finally {
        await server.stop();
      }
    }, 3000);

    it('keeps the default of an option given as undefined (maxAttempts, maxBatchEvents)', async () => {
      const { fetch, sent } = fakeFetch((req) =>
        sent.length <= 10 ? { status: 503, body: { code: 'OVERLOADED' } } : ok(req),
      );
      const mesh = client(fetch, { retry: { maxAttempts: undefined, initialDelayMs: 1, maxDelayMs: 1 } });
      await expect(mesh.publish({ source: '/s', type: 't' })).rejects.toBeInstanceOf(UnavailableError);
      expect(sent).toHaveLength(5);
      const many = fakeFetch(ok);
      await client(many.fetch, { publish: { maxBatchEvents: undefined } }).publishMany(events(501));
      expect(many.sent.map((r) => ids(r).length)).toEqual([500, 1]);
    }, 3000);

    it.each([
      ['retry.maxAttempts', { retry: { maxAttempts: NaN } }],
      ['retry.maxAttempts', { retry: { maxAttempts: 0 } }],
      ['retry.initialDelayMs', { retry: { initialDelayMs: -1 } }],
      ['retry.maxDelayMs', { retry: { maxDelayMs: Infinity } }],
      ['retry.attemptTimeoutMs', { retry: { attemptTimeoutMs: 0 } }],
      ['publish.maxEventsInFlight', { publish: { maxEventsInFlight: 0 } }],
      ['publish.maxBytesInFlight', { publish: { maxBytesInFlight: NaN } }],
      ['publish.lingerMs', { publish: { lingerMs: -5 } }],
      ['publish.maxBatchEvents', { publish: { maxBatchEvents: 2.5 } }],
      ['publish.maxBatchBytes', { publish: { maxBatchBytes: 0 } }],
    ])('refuses %s %p at construction, naming it', (name, options) => {
      expect(() => client(fakeFetch(ok).fetch, options)).toThrow(new RegExp(name.replace('.', '\\.')));
    });

    it('does not wait out a Retry-After longer than maxRetryAfterMs: the 429 fails at once', async () => {
      const { fetch, sent } = fakeFetch(() => ({
        status: 429,
        body: { code: 'QUOTA_EXCEEDED' },
        headers: { 'retry-after': '3600' },
      }));
      const started = Date.now();
      await expect(client(fetch).publish({ source: '/s', type: 't' })).rejects.toMatchObject({
        name: 'UnavailableError',
        code: 'QUOTA_EXCEEDED',
      });
      expect(sent).toHaveLength(1);
      expect(Date.now() - started).toBeLessThan(1000);
    }, 3000);

    it('close() sends the publishes still lingering and waits for those in flight', async () => {
      const { held, slow } = heldFetch();
      const mesh = client(slow, { publish: { lingerMs: 60_000 } });
      const settled: string[] = [];
      for (const id of ['a', 'b']) void mesh.publish({ id, source: '/s', type: 't' }).then((r) => settled.push(r.id));
      const closed = mesh.close();
      let done = false;
      void closed.then(() => (done = true));
      await new Promise((r) => setTimeout(r, 20));
      expect({ held: held.map((h) => h.ids), done }).toEqual({ held: [['a', 'b']], done: false });
      held[0].go();
      await closed;
      expect(settled).toEqual(['a', 'b']);
    }, 3000);

    it('publish of an event JSON cannot write rejects its promise rather than throwing at the call', async () => {
      const { fetch, sent } = fakeFetch(ok);
      const mesh = client(fetch);
      let outcome: Promise<unknown> | undefined;
      expect(() => (outcome = mesh.publish({ source: '/s', type: 't', data: 10n }))).not.toThrow();
      await expect(outcome).rejects.toBeInstanceOf(TypeError);
      expect(sent).toHaveLength(0);
    });

    it('request: refuses a timeoutMs the runtime would refuse before sending, and gives the attempt the reply wait', async () => {
      const { fetch, sent } = fakeFetch(() => ({
        status: 200,
        body: { id: 'r', source: '/s', type: 'reply', specversion: '1.0' },
      }));
      const mesh = client(fetch);
      for (const timeoutMs of [NaN, 0, -1, 1.5, 300_001])
        await expect(mesh.request({ source: '/s', type: 'q' }, { timeoutMs })).rejects.toBeInstanceOf(RangeError);
      expect(sent).toHaveLength(0);
      expect((await mesh.request({ source: '/s', type: 'q' }, { timeoutMs: 1000 })).type).toBe('reply');
    });

    it("publishMany ordered: a 400 naming one event fails the call without sending the request's others again", async () => {
      const { fetch, sent } = fakeFetch((req) =>
        ids(req).includes('b')
          ? { status: 400, body: { code: 'INVALID_CLOUDEVENT', index: ids(req).indexOf('b'), field: 'type' } }
          : ok(req),
      );
      const mesh = client(fetch, { publish: { maxBatchEvents: 3 } });
      const list = ['a', 'b', 'c', 'd'].map((id) => ({ id, source: '/s', type: 't' }));
      await expect(mesh.publishMany(list, { ordered: true })).rejects.toMatchObject({
        code: 'INVALID_CLOUDEVENT',
        field: 'type',
      });
      await new Promise((r) => setTimeout(r, 20));
      expect(sent.map(ids)).toEqual([['a', 'b', 'c']]);
      expect(mesh['publisher'].inFlight).toEqual({ events: 0, bytes: 0 });
    }, 3000);
  });
});

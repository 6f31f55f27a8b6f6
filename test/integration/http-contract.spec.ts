import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import type { OpenApiDocument, OpenApiOperation } from '../../apps/gateway/src/operations/openapi';
import { openApiPathOf, undocumented } from '../../apps/gateway/src/operations/openapi';
import { RouteTable } from '../../apps/gateway/src/http/route-table';
import { frameFromKafkaRecord } from '@libs/frame';
import { PartitionReader } from '@libs/kafka';
import { DevSigningKey, ensureDevSigningKey, mintDevToken, parseMintArgs } from '@libs/security/dev-token';
import { testConfig, uniqueTopic } from '../support/env';

/**
 * The HTTP contract of a running gateway. The API document (`/openapi.json`) lists every route the app registered,
 * and what sampled requests answer is what it documents (the status, and a body valid against the status's
 * schema). Every answer names its request (`x-request-id`), and a published event's Kafka record carries the id.
 */
describe('the HTTP contract (real gateway)', () => {
  const topic = uniqueTopic('openapi');
  let dir: string;
  let signing: DevSigningKey;
  let instance: RunningInstance;
  let document: OpenApiDocument;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'openapi-spec-'));
    signing = await ensureDevSigningKey(dir);
    instance = await startInstance(
      testConfig({
        EVENTMESH_INSTANCE_ID: `openapi-${randomUUID().slice(0, 8)}`,
        EVENTMESH_KAFKA_TOPICS: topic,
        EVENTMESH_HTTP_PORT: '0',
        // The ingress gate open (samples publish and subscribe without a credential), the admin gate enforcing.
        EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
        EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
        EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: signing.jwksPath,
        EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: 'eventmesh-dev',
        EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: 'eventmesh',
      }),
      { roles: ['gateway'] },
    );
    const response = await fetch(`${instance.url}/openapi.json`);
    expect(response.status).toBe(200);
    document = (await response.json()) as OpenApiDocument;
  });
  afterAll(async () => {
    await instance?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is OpenAPI 3.1 and lists every route the running app serves', () => {
    expect(document.openapi).toBe('3.1.0');
    const routes = instance.app!.get(RouteTable).routes();
    expect(routes.length).toBeGreaterThan(35);
    // The routes served ahead of Fastify, and Fastify's own (WebSocket), are in the table too.
    expect(routes.map((r) => `${r.method} ${r.url}`)).toEqual(
      expect.arrayContaining(['POST /events/publish', 'GET /subscriptions/:id/ws', 'GET /subscriptions/:id']),
    );
    expect(undocumented(routes, document)).toEqual([]);
  });

  /** Sends a request and checks its answer against the document: the status is documented, the body valid. */
  async function sample(
    method: string,
    route: string,
    url: string,
    init: { body?: unknown; headers?: Record<string, string>; raw?: string } = {},
  ) {
    const response = await fetch(`${instance.url}${url}`, {
      method,
      headers: {
        ...(init.body !== undefined || init.raw !== undefined ? { 'content-type': 'application/json' } : {}),
        ...init.headers,
      },
      ...(init.body !== undefined
        ? { body: JSON.stringify(init.body) }
        : init.raw !== undefined
          ? { body: init.raw }
          : {}),
    });
    const text = await response.text();
    const operation = document.paths[openApiPathOf(route).path]?.[method.toLowerCase()];
    expect(operation).toBeDefined();
    const documented = operation!.responses[String(response.status)];
    expect([
      `${method} ${route}`,
      response.status,
      documented === undefined ? 'undocumented status' : 'documented',
    ]).toEqual([`${method} ${route}`, response.status, 'documented']);
    if (documented.headers?.['x-request-id']) expect(response.headers.get('x-request-id')).toEqual(expect.any(String));
    const contentType = (response.headers.get('content-type') ?? '').split(';')[0];
    const schema = documented.content?.[contentType]?.schema;
    if (text !== '') {
      expect([
        `${method} ${route} ${response.status}`,
        contentType,
        schema === undefined ? 'no schema for this content type' : 'schema',
      ]).toEqual([`${method} ${route} ${response.status}`, contentType, 'schema']);
      const validate = ajv.compile(schema!);
      const body = contentType.endsWith('json') ? (JSON.parse(text) as unknown) : text;
      const valid = validate(body);
      expect([`${method} ${route} ${response.status}`, valid ? [] : validate.errors]).toEqual([
        `${method} ${route} ${response.status}`,
        [],
      ]);
    } else {
      expect(schema).toBeUndefined();
    }
    return {
      status: response.status,
      body: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>),
      headers: response.headers,
    };
  }

  const event = () => ({
    specversion: '1.0',
    id: randomUUID(),
    source: '/openapi-spec',
    type: 'test.sampled',
    data: { n: 1 },
  });

  it('publish: 202 with where the event went, 400 for an event without a type, 415 for a type it does not take', async () => {
    expect(
      (
        await sample('POST', '/events/publish', `/events/publish?topic=${topic}`, {
          body: event(),
          headers: { 'content-type': 'application/cloudevents+json' },
        })
      ).status,
    ).toBe(202);
    const batch = [event(), event()];
    expect(
      (
        await sample('POST', '/events/publish', `/events/publish?topic=${topic}`, {
          raw: JSON.stringify(batch),
          headers: { 'content-type': 'application/cloudevents-batch+json' },
        })
      ).status,
    ).toBe(202);
    const { type: _type, ...typeless } = event();
    const bad = await sample('POST', '/events/publish', `/events/publish?topic=${topic}`, {
      body: typeless,
      headers: { 'content-type': 'application/cloudevents+json' },
    });
    expect([bad.status, bad.body?.code]).toEqual([400, 'INVALID_CLOUDEVENT']);
    expect(
      (
        await sample('POST', '/events/publish', '/events/publish', {
          raw: 'x',
          headers: { 'content-type': 'text/plain' },
        })
      ).status,
    ).toBe(415);
  });

  it('subscriptions: 201 created, 200 read, 400 bad input, 404 not found, 204 deleted', async () => {
    const created = await sample('POST', '/subscriptions', '/subscriptions', { body: { protocol: 'STREAM', topic } });
    expect(created.status).toBe(201);
    const id = created.body!.id as string;
    expect((await sample('GET', '/subscriptions/:id', `/subscriptions/${id}`)).status).toBe(200);
    expect((await sample('GET', '/subscriptions', '/subscriptions')).status).toBe(200);
    expect((await sample('GET', '/subscriptions/:id/dead-letters', `/subscriptions/${id}/dead-letters`)).status).toBe(
      200,
    );
    expect((await sample('GET', '/subscriptions/:id/poll', `/subscriptions/${id}/poll?waitMs=0`)).status).toBe(200);
    expect(
      (await sample('POST', '/subscriptions', '/subscriptions', { body: { protocol: 'HTTP', topic } })).status,
    ).toBe(400);
    expect((await sample('GET', '/subscriptions/:id', `/subscriptions/${randomUUID()}`)).status).toBe(404);
    expect((await sample('DELETE', '/subscriptions/:id', `/subscriptions/${id}`)).status).toBe(204);
  });

  it('subscriptions by name: 201 created, 200 found, 409 another topic, 200 listed by name', async () => {
    const name = `contract-${randomUUID().slice(0, 8)}`;
    const ensure = (body: object) =>
      sample('PUT', '/subscriptions/by-name/:name', `/subscriptions/by-name/${name}`, { body });
    expect((await ensure({ protocol: 'STREAM', topic })).status).toBe(201);
    expect((await ensure({ protocol: 'STREAM', topic })).status).toBe(200);
    expect((await ensure({ protocol: 'HTTP', topic, sink: 'http://127.0.0.1:9/hook' })).status).toBe(409);
    expect((await sample('GET', '/subscriptions', `/subscriptions?name=${name}`)).body).toMatchObject([{ name }]);
  });

  it('the admin API under its gate: 401 without a credential, 403 without the admin scope, 200 with it', async () => {
    const tenant = `t-${randomUUID().slice(0, 8)}`;
    const token = (scopes: string) =>
      mintDevToken(signing, parseMintArgs(['--tenant', tenant, '--scopes', scopes, '--sub', `${tenant}-svc`]));
    expect((await sample('GET', '/admin/acl/rules', '/admin/acl/rules')).status).toBe(401);
    expect(
      (
        await sample('GET', '/admin/acl/rules', '/admin/acl/rules', {
          headers: { authorization: `Bearer ${await token('publish')}` },
        })
      ).status,
    ).toBe(403);
    expect(
      (
        await sample('GET', '/admin/acl/rules', '/admin/acl/rules', {
          headers: { authorization: `Bearer ${await token('admin')}` },
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await sample('POST', '/admin/acl/rules', '/admin/acl/rules', {
          body: { subject: '*' },
          headers: { authorization: `Bearer ${await token('admin')}` },
        })
      ).status,
    ).toBe(400);
  });

  it('health, and the document itself as a page', async () => {
    expect([200, 503]).toContain((await sample('GET', '/health', '/health')).status);
    const page = await fetch(`${instance.url}/docs`);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    for (const path of Object.keys(document.paths)) expect(html).toContain(`<code>${path}</code>`);
  });

  describe('the document is the contract', () => {
    const operator = () =>
      mintDevToken(signing, parseMintArgs(['--tenant', 'default', '--scopes', 'admin', '--sub', 'contract-operator']));
    const operation = (method: string, path: string) =>
      document.paths[path]?.[method] as (OpenApiOperation & Record<string, unknown>) | undefined;
    const requestSchema = (method: string, path: string) =>
      (operation(method, path)!.requestBody as { content: Record<string, { schema: object }> }).content[
        'application/json'
      ].schema;
    const queryParam = (method: string, path: string, name: string) =>
      (operation(method, path)!.parameters as { name: string; in: string; schema: Record<string, unknown> }[]).find(
        (p) => p.name === name && p.in === 'query',
      );

    it('says which credential each operation takes, as the running gates decide', () => {
      expect(Object.keys(document.components.securitySchemes).sort()).toEqual(['apiKey', 'bearer', 'clusterToken']);
      const credential = [{ bearer: [] }, { apiKey: [] }];
      // This gateway: the admin gate enforcing with TokenAuth, the ingress gate open.
      expect(operation('get', '/admin/api-keys')!.security).toEqual(credential);
      expect(operation('put', '/admin/tenants/{tenant}/quota')!.security).toEqual(credential);
      expect(operation('get', '/subscriptions')!.security).toEqual([]);
      expect(operation('get', '/health')!.security).toEqual([]);
      expect(operation('get', '/internal/streams/channel')!.security).toEqual([{ clusterToken: [] }]);
      for (const [path, methods] of Object.entries(document.paths)) {
        for (const [method, op] of Object.entries(methods))
          expect([method, path, Array.isArray(op.security)]).toEqual([method, path, true]);
      }
    });

    it('states the limits the routes enforce, and the routes enforce what it states', async () => {
      expect(queryParam('get', '/subscriptions/{id}/poll', 'max')!.schema).toMatchObject({
        type: 'integer',
        minimum: 1,
        maximum: 1000,
      });
      expect(queryParam('get', '/subscriptions/{id}/poll', 'waitMs')!.schema).toMatchObject({
        type: 'integer',
        minimum: 0,
        maximum: 60000,
      });
      expect(queryParam('get', '/subscriptions/{id}/events', 'window')!.schema).toMatchObject({
        type: 'integer',
        minimum: 1,
        maximum: 1000,
      });
      const created = await sample('POST', '/subscriptions', '/subscriptions', { body: { protocol: 'STREAM', topic } });
      const id = created.body!.id as string;
      for (const query of ['max=0', 'max=1001', 'window=0', 'waitMs=60001', 'max=1.5', 'max=']) {
        const refused = await sample('GET', '/subscriptions/:id/poll', `/subscriptions/${id}/poll?waitMs=0&${query}`);
        expect([query, refused.status, refused.body?.code]).toEqual([query, 400, 'INVALID_REQUEST']);
      }
      expect(
        (await sample('GET', '/subscriptions/:id/poll', `/subscriptions/${id}/poll?waitMs=0&max=1000&window=1000`))
          .status,
      ).toBe(200);
      const sse = await sample('GET', '/subscriptions/:id/events', `/subscriptions/${id}/events?window=0`);
      expect([sse.status, sse.body?.field]).toEqual([400, 'window']);
    });

    it('requires a sink of an HTTP subscription, and none of a STREAM one, as the route does', async () => {
      const validate = ajv.compile(requestSchema('post', '/subscriptions'));
      const bodies = [
        {},
        { protocol: 'HTTP', topic },
        { protocol: 'STREAM', topic, sink: 'http://127.0.0.1:9/x' },
        { protocol: 'STREAM', topic, config: { ordering: 'key' } },
        { protocol: 'STREAM', topic },
      ];
      const verdicts = [];
      for (const body of bodies) {
        const answer = await sample('POST', '/subscriptions', '/subscriptions', { body });
        verdicts.push([body, validate(body), answer.status]);
      }
      expect(verdicts).toEqual(bodies.map((body, i) => [body, i === 4, i === 4 ? 201 : 400]));
    });

    it("documents the 400s of the admin routes' parameters", async () => {
      const auth = { authorization: `Bearer ${await operator()}` };
      const keys = await sample('GET', '/admin/api-keys', '/admin/api-keys?tenant=%C2%A2', { headers: auth });
      expect([keys.status, keys.body?.field]).toEqual([400, 'tenant']);
      const secrets = await sample('GET', '/admin/publishers/:principal/secrets', '/admin/publishers/%0F/secrets', {
        headers: auth,
      });
      expect([secrets.status, secrets.body?.field]).toEqual([400, 'principal']);
    });

    it('refuses a quota PUT without a body and writes nothing', async () => {
      const tenant = `q-${randomUUID().slice(0, 8)}`;
      const answer = await sample('PUT', '/admin/tenants/:tenant/quota', `/admin/tenants/${tenant}/quota`, {
        headers: { authorization: `Bearer ${await operator()}` },
      });
      expect([answer.status, answer.body?.code, answer.body?.field]).toEqual([400, 'INVALID_REQUEST', 'body']);
      const asNull = await sample('PUT', '/admin/tenants/:tenant/quota', `/admin/tenants/${tenant}/quota`, {
        raw: 'null',
        headers: { authorization: `Bearer ${await operator()}` },
      });
      expect([asNull.status, asNull.body?.field]).toEqual([400, 'body']);
      const rows: unknown[] = await instance.deps.db.query('SELECT tenant FROM tenant_quotas WHERE tenant = $1', [
        tenant,
      ]);
      expect(rows).toEqual([]);
    });

    it("seeks a subscription to a time before 1970 as to the log's start (Kafka takes no negative time)", async () => {
      const id = (await sample('POST', '/subscriptions', '/subscriptions', { body: { protocol: 'STREAM', topic } }))
        .body!.id as string;
      const seek = await sample('POST', '/subscriptions/:id/offsets/seek', `/subscriptions/${id}/offsets/seek`, {
        body: { to: '0020-02-29T00:00:00Z' },
        headers: { authorization: `Bearer ${await operator()}` },
      });
      expect(seek.status).toBe(200);
    });

    it('answers a method a path does not serve with 405, Allow and a machine-readable body; an unknown path stays 404', async () => {
      const auth = { authorization: `Bearer ${await operator()}` };
      const cases: [string, string, string[]][] = [
        ['TRACE', '/admin/api-keys', ['GET', 'HEAD', 'POST']],
        ['QUERY', '/admin/api-keys/some-id', ['DELETE']],
        ['PATCH', '/subscriptions', ['GET', 'HEAD', 'POST']],
        ['GET', '/events/publish', ['POST']],
      ];
      // node:http: fetch refuses TRACE (and QUERY is newer than it).
      const send = (method: string, path: string) =>
        new Promise<{ status: number; allow: string | undefined; body: Record<string, unknown> }>((resolve, reject) => {
          const req = httpRequest(`${instance.url}${path}`, { method, headers: auth }, (res) => {
            let text = '';
            res.on('data', (chunk: Buffer) => (text += chunk.toString()));
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                allow: res.headers.allow,
                body: JSON.parse(text) as Record<string, unknown>,
              }),
            );
          });
          req.on('error', reject);
          req.end();
        });
      for (const [method, path, allow] of cases) {
        const answer = await send(method, path);
        expect([method, path, answer.status, answer.allow, answer.body.code, answer.body.allow]).toEqual([
          method,
          path,
          405,
          allow.join(', '),
          'METHOD_NOT_ALLOWED',
          allow,
        ]);
      }
      expect((await send('TRACE', '/no/such/path')).status).toBe(404);
    });

    it('serves the limits a client sizes its publishes by, as documented', async () => {
      const limits = await sample('GET', '/limits', '/limits');
      expect(limits.status).toBe(200);
      const config = instance.config;
      expect(limits.body).toMatchObject({
        maxBodyBytes: config.http.bodyLimitBytes,
        maxBatchEvents: config.kafka.produceMaxBatchEvents,
        burst: null,
      });
      expect(limits.body!.maxPublish).toEqual({
        events: config.kafka.produceMaxBatchEvents,
        bytes: config.http.bodyLimitBytes,
      });
      const batch = (
        operation('post', '/events/publish')!.requestBody as {
          content: Record<string, { schema: Record<string, unknown> }>;
        }
      ).content['application/cloudevents-batch+json'].schema;
      expect(batch).toMatchObject({ type: 'array', minItems: 1, maxItems: config.kafka.produceMaxBatchEvents });
    });

    // Found by the fuzz step: an answer's fields were checked only for its action (a `reason` of 42 or a `deadlineMs`
    // past the limit on an `ack` accepted), and an `extend` without its deadline was refused although documented.
    it("refuses an answer whose fields break the document's schema, whatever its action, as the document does", async () => {
      const validate = ajv.compile(requestSchema('post', '/subscriptions/{id}/acks'));
      const id = (await sample('POST', '/subscriptions', '/subscriptions', { body: { protocol: 'STREAM', topic } }))
        .body!.id as string;
      const bad: [Record<string, unknown>, string][] = [
        [{ deliveryId: 'd', action: 'reject', reason: 42 }, 'reason'],
        [{ deliveryId: 'd', action: 'ack', deadlineMs: 3_600_001 }, 'deadlineMs'],
        [{ deliveryId: 'd', action: 'ack', delayMs: '5' }, 'delayMs'],
        [{ deliveryId: 'd', action: 'extend' }, 'deadlineMs'],
      ];
      for (const [answer, field] of bad) {
        const refused = await sample('POST', '/subscriptions/:id/acks', `/subscriptions/${id}/acks`, {
          body: [{ deliveryId: 'other', action: 'ack' }, answer],
        });
        expect([answer, validate([answer]), refused.status, refused.body?.field, refused.body?.index]).toEqual([
          answer,
          false,
          400,
          field,
          1,
        ]);
      }
      // Valid ones pass the document and the route (no delivery pending: not accepted, nothing refused).
      const good = { deliveryId: 'd', action: 'reject', reason: 'bad input', deadlineMs: 1000 };
      const taken = await sample('POST', '/subscriptions/:id/acks', `/subscriptions/${id}/acks`, { body: [good] });
      expect([validate([good]), taken.status, taken.body]).toEqual([true, 200, [{ deliveryId: 'd', accepted: false }]]);
    });

    // Found by the fuzz step: a replay filter's `type` holding a NUL reached Postgres, which refused it (500).
    it('refuses a dead-letter filter holding a NUL with 400, as the document does', async () => {
      const id = (await sample('POST', '/subscriptions', '/subscriptions', { body: { protocol: 'STREAM', topic } }))
        .body!.id as string;
      const auth = { authorization: `Bearer ${await operator()}` };
      const body = { filter: { type: 'a\u0000b' } };
      const validate = ajv.compile(requestSchema('post', '/subscriptions/{id}/dead-letters/replays'));
      const replay = await sample(
        'POST',
        '/subscriptions/:id/dead-letters/replays',
        `/subscriptions/${id}/dead-letters/replays`,
        { body, headers: auth },
      );
      expect([validate(body), replay.status, replay.body?.field]).toEqual([false, 400, 'filter.type']);
      const browse = await sample(
        'GET',
        '/subscriptions/:id/dead-letters',
        `/subscriptions/${id}/dead-letters?source=%00`,
        { headers: auth },
      );
      expect([browse.status, browse.body?.field]).toEqual([400, 'source']);
    });

    // Found by the fuzz step: an extension of 2^53 and a `data_base64` of null were published.
    it('refuses an extension beyond the CloudEvents Integer range and a data_base64 that is not a string, as the document does', async () => {
      const schema = (
        operation('post', '/events/publish')!.requestBody as {
          content: Record<string, { schema: Record<string, unknown> }>;
        }
      ).content['application/cloudevents+json'].schema;
      const validate = ajv.compile(schema);
      const publish = (body: unknown) =>
        sample('POST', '/events/publish', `/events/publish?topic=${topic}`, {
          body,
          headers: { 'content-type': 'application/cloudevents+json' },
        });
      for (const extra of [{ big: 2 ** 53 }, { big: 2147483648 }, { small: -2147483649 }, { data_base64: null }]) {
        const body = { ...event(), data: undefined, ...extra };
        const refused = await publish(body);
        expect([extra, validate(body), refused.status, refused.body?.code]).toEqual([
          extra,
          false,
          400,
          'INVALID_CLOUDEVENT',
        ]);
      }
      const edge = { ...event(), big: 2147483647, small: -2147483648 };
      expect([validate(edge), (await publish(edge)).status]).toEqual([true, 202]);
    });
  });

  describe('request ids', () => {
    const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    const publish = (headers: Record<string, string>) =>
      fetch(`${instance.url}/events/publish?topic=${topic}`, {
        method: 'POST',
        headers: { 'content-type': 'application/cloudevents+json', ...headers },
        body: JSON.stringify(event()),
      });

    it("answers every request with its id: the caller's when usable, else a fresh one", async () => {
      const mine = `req-${randomUUID()}`;
      const answers = [
        await publish({ 'x-request-id': mine }),
        await fetch(`${instance.url}/subscriptions`, { headers: { 'x-request-id': mine } }),
        await fetch(`${instance.url}/no/such/route`, { headers: { 'x-request-id': mine } }),
        await fetch(`${instance.url}/admin/acl/rules`, { headers: { 'x-request-id': mine } }),
      ];
      expect(answers.map((a) => [a.status, a.headers.get('x-request-id')])).toEqual([
        [202, mine],
        [200, mine],
        [404, mine],
        [401, mine],
      ]);
      const unusable = ['has space', 'x'.repeat(129), 'quote"d', ''];
      for (const sent of unusable) {
        const answer = await fetch(`${instance.url}/subscriptions`, { headers: { 'x-request-id': sent } });
        expect([sent, answer.headers.get('x-request-id')]).toEqual([sent, expect.stringMatching(UUID)]);
      }
      const a = (await fetch(`${instance.url}/subscriptions`)).headers.get('x-request-id');
      const b = (await fetch(`${instance.url}/subscriptions`)).headers.get('x-request-id');
      expect([a, b]).toEqual([expect.stringMatching(UUID), expect.stringMatching(UUID)]);
      expect(a).not.toBe(b);
    });

    it("writes the publishing request's id into the event's Kafka record", async () => {
      const mine = `req-${randomUUID()}`;
      const answer = await publish({ 'x-request-id': mine });
      expect(answer.status).toBe(202);
      const { partition, offset } = (await answer.json()) as { partition: number; offset: number };
      const reader = new PartitionReader(instance.deps.kafka);
      await reader.connect();
      try {
        const [fetched] = await reader.fetch([{ topic, partition, offset }], { maxWaitMs: 1000 });
        const record = fetched.records[0];
        expect(frameFromKafkaRecord(record.headers, record.value).requestId).toBe(mine);
      } finally {
        await reader.disconnect();
      }
    });
  });
});

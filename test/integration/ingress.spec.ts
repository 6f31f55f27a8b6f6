import { randomUUID } from 'node:crypto';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { ErrorCode } from '@libs/errors';
import { FetchedRecord, PartitionReader } from '@libs/kafka';
import { GateFilter, GateRefusal, GateContext, LoggingAuditSink, SecurityGate, Verdict } from '@libs/security';
import { testConfig, uniqueTopic } from '../support/env';

/** A gate filter that records every request and refuses those carrying `x-test-deny`. */
class RecordingFilter implements GateFilter {
  readonly name = 'acl';
  readonly seen: string[] = [];
  check({ request }: GateContext): Verdict {
    this.seen.push(request.route);
    if (request.headers['x-test-deny'])
      return { allow: false, refusal: new GateRefusal(ErrorCode.Forbidden, 'denied by the test gate', 'test') };
    return { allow: true };
  }
}

/**
 * Ingress on a real gateway and a real broker: the three CloudEvents HTTP content modes, the record written to
 * Kafka (CloudEvents Kafka binding, binary mode), the request gate, coalescing, and bad inputs that change nothing.
 */
describe('ingress (real Kafka)', () => {
  const topic = uniqueTopic('ingress');
  const config = testConfig({
    EVENTMESH_INSTANCE_ID: `ingress-${randomUUID().slice(0, 8)}`,
    EVENTMESH_KAFKA_TOPICS: topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: '3',
    EVENTMESH_HTTP_PORT: '0',
    EVENTMESH_HTTP_BODY_LIMIT_BYTES: '4096',
    EVENTMESH_KAFKA_PRODUCE_MAX_BATCH_EVENTS: '100',
  });
  const gate = new RecordingFilter();
  const gateOf = (name: string) =>
    new SecurityGate({ name, filters: [gate], failClosed: true, audit: new LoggingAuditSink(), auditAllows: false });
  const gates = { ingress: gateOf('ingress'), admin: gateOf('admin'), close: async () => undefined };
  let instance: RunningInstance;
  let reader: PartitionReader;

  beforeAll(async () => {
    instance = await startInstance(config, { roles: ['gateway'], gates });
    reader = new PartitionReader(instance.deps.kafka);
    await reader.connect();
  });
  afterAll(async () => {
    await reader?.disconnect();
    await instance?.close();
  });

  const post = (body: string | Buffer, headers: Record<string, string>, query = `?topic=${topic}`) =>
    fetch(`${instance.url}/events/publish${query}`, { method: 'POST', headers, body });

  async function recordAt(partition: number, offset: number): Promise<FetchedRecord> {
    const [fetched] = await reader.fetch([{ topic, partition, offset }], { maxWaitMs: 1000 });
    return fetched.records[0];
  }

  async function endOffsets(): Promise<number> {
    return [...(await instance.deps.topics.endOffsets(topic)).values()].reduce((a, b) => a + b, 0);
  }

  const text = (v: unknown) => (Buffer.isBuffer(v) ? v.toString() : String(v));

  it('takes the binary mode: ce-* headers, the body is the data, untouched', async () => {
    const response = await post('plain text, not JSON', {
      'ce-specversion': '1.0',
      'ce-id': 'bin-1',
      'ce-source': '/ingress',
      'ce-type': 'ingress.binary',
      'ce-subject': 'Gr%C3%BC%C3%9Fe',
      'ce-tenant': 'acme',
      'content-type': 'text/plain',
    });
    expect(response.status).toBe(202);
    const receipt = (await response.json()) as { id: string; partition: number; offset: number };
    expect(receipt.id).toBe('bin-1');
    const record = await recordAt(receipt.partition, receipt.offset);
    expect(record.value!.toString()).toBe('plain text, not JSON');
    expect(text(record.headers.ce_id)).toBe('bin-1');
    expect(text(record.headers.ce_subject)).toBe('Grüße');
    expect(text(record.headers.ce_tenant)).toBe('acme');
    expect(text(record.headers['content-type'])).toBe('text/plain');
    expect(record.key!.toString()).toBe('/ingress');
  });

  it('keeps JSON data of the binary mode as bytes, even when it is not valid JSON', async () => {
    const response = await post('{"not": json', {
      'ce-specversion': '1.0',
      'ce-id': 'bin-2',
      'ce-source': '/ingress',
      'ce-type': 't',
      'content-type': 'application/json',
    });
    expect(response.status).toBe(202);
    const receipt = (await response.json()) as { partition: number; offset: number };
    expect((await recordAt(receipt.partition, receipt.offset)).value!.toString()).toBe('{"not": json');
  });

  it('takes the structured mode and keys the record by partitionkey', async () => {
    const response = await post(
      JSON.stringify({
        specversion: '1.0',
        id: 'st-1',
        source: '/ingress',
        type: 't',
        partitionkey: 'customer-7',
        data: { a: 1 },
      }),
      { 'content-type': 'application/cloudevents+json; charset=utf-8' },
    );
    expect(response.status).toBe(202);
    const receipt = (await response.json()) as { partition: number; offset: number };
    const record = await recordAt(receipt.partition, receipt.offset);
    expect(record.key!.toString()).toBe('customer-7');
    expect(JSON.parse(record.value!.toString())).toEqual({ a: 1 });
    expect(text(record.headers['content-type'])).toBe('application/json');
  });

  it('takes a batch and reports every event with its own partition and offset', async () => {
    const events = [1, 2, 3].map((n) => ({
      specversion: '1.0',
      id: `b-${n}`,
      source: '/ingress',
      type: 't',
      partitionkey: `k${n}`,
      data: n,
    }));
    const response = await post(JSON.stringify(events), { 'content-type': 'application/cloudevents-batch+json' });
    expect(response.status).toBe(202);
    const { results } = (await response.json()) as { results: { id: string; partition: number; offset: number }[] };
    expect(results.map((r) => r.id)).toEqual(['b-1', 'b-2', 'b-3']);
    for (const [i, r] of results.entries()) {
      const record = await recordAt(r.partition, r.offset);
      expect(text(record.headers.ce_id)).toBe(`b-${i + 1}`);
    }
  });

  it('coalesces concurrent publishes into fewer produce requests, each answered with its own offset', async () => {
    const before = { ...instance.deps.producer.stats };
    const responses = await Promise.all(
      Array.from({ length: 200 }, (_, n) =>
        post(
          JSON.stringify({
            specversion: '1.0',
            id: `c-${n}`,
            source: '/ingress',
            type: 't',
            partitionkey: `k${n % 7}`,
          }),
          {
            'content-type': 'application/cloudevents+json',
          },
        ),
      ),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(200).fill(202));
    const receipts = (await Promise.all(responses.map((r) => r.json()))) as {
      id: string;
      partition: number;
      offset: number;
    }[];
    const positions = new Set(receipts.map((r) => `${r.partition}#${r.offset}`));
    expect(positions.size).toBe(200);
    const requests = instance.deps.producer.stats.requests - before.requests;
    expect(instance.deps.producer.stats.events - before.events).toBe(200);
    expect(requests).toBeLessThan(200);
    const sample = receipts[137];
    expect(text((await recordAt(sample.partition, sample.offset)).headers.ce_id)).toBe('c-137');
  });

  const big = JSON.stringify({ specversion: '1.0', id: 'x', source: '/s', type: 't', data: 'x'.repeat(5000) });
  const ce = 'application/cloudevents+json';
  it.each([
    ['malformed JSON', '{"specversion":', { 'content-type': ce }, 400, 'MALFORMED_JSON'],
    ['an empty JSON body', '', { 'content-type': ce }, 400, 'MALFORMED_JSON'],
    [
      'a missing id',
      JSON.stringify({ specversion: '1.0', source: '/s', type: 't' }),
      { 'content-type': ce },
      400,
      'INVALID_CLOUDEVENT',
    ],
    [
      'a bad time',
      JSON.stringify({ specversion: '1.0', id: 'x', source: '/s', type: 't', time: 'noon' }),
      { 'content-type': ce },
      400,
      'INVALID_CLOUDEVENT',
    ],
    ['an unsupported media type', 'hello', { 'content-type': 'text/plain' }, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['a body over the limit', big, { 'content-type': ce }, 413, 'PAYLOAD_TOO_LARGE'],
    ['an empty batch', '[]', { 'content-type': 'application/cloudevents-batch+json' }, 400, 'INVALID_CLOUDEVENT'],
    [
      'a batch that is not an array',
      '{}',
      { 'content-type': 'application/cloudevents-batch+json' },
      400,
      'INVALID_CLOUDEVENT',
    ],
    [
      'binary mode without ce-id',
      'x',
      { 'ce-specversion': '1.0', 'ce-source': '/s', 'ce-type': 't', 'content-type': 'text/plain' },
      400,
      'INVALID_CLOUDEVENT',
    ],
    [
      'a gate refusal',
      JSON.stringify({ specversion: '1.0', id: 'x', source: '/s', type: 't' }),
      { 'content-type': ce, 'x-test-deny': '1' },
      403,
      'FORBIDDEN',
    ],
  ])('answers %s with its status and code, and writes nothing', async (_, body, headers, status, code) => {
    const before = await endOffsets();
    const response = await post(body as string, headers as Record<string, string>);
    expect(response.status).toBe(status);
    expect(((await response.json()) as { code: string }).code).toBe(code);
    expect(await endOffsets()).toBe(before);
  });

  it('answers a body over the limit sent without a content-length (chunked) with 413 and writes nothing', async () => {
    const before = await endOffsets();
    const chunks = [big.slice(0, 3000), big.slice(3000)];
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = chunks.shift();
        if (next === undefined) controller.close();
        else controller.enqueue(new TextEncoder().encode(next));
      },
    });
    const response = await fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': ce },
      body,
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(413);
    expect(await response.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', limitBytes: 4096 });
    expect(await endOffsets()).toBe(before);
  });

  it('answers two topics in one publish with 400 and writes nothing', async () => {
    const before = await endOffsets();
    const response = await post(
      JSON.stringify({ specversion: '1.0', id: 'x', source: '/s', type: 't' }),
      { 'content-type': ce },
      `?topic=${topic}&topic=${topic}`,
    );
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: 'INVALID_REQUEST', field: 'topic' });
    expect(await endOffsets()).toBe(before);
  });

  it('leaves other methods on the publish path to the router: GET is a 405 in the error shape, naming POST', async () => {
    const response = await fetch(`${instance.url}/events/publish?topic=${topic}`);
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('POST');
    expect(await response.json()).toMatchObject({ code: 'METHOD_NOT_ALLOWED', allow: ['POST'] });
  });

  it('refuses a whole batch when one event is invalid, naming its index, and writes none of it', async () => {
    const before = await endOffsets();
    const events = [
      { specversion: '1.0', id: 'ok-1', source: '/s', type: 't' },
      { specversion: '1.0', id: 'bad', source: '/s' },
      { specversion: '1.0', id: 'ok-2', source: '/s', type: 't' },
    ];
    const response = await post(JSON.stringify(events), { 'content-type': 'application/cloudevents-batch+json' });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      code: 'INVALID_CLOUDEVENT',
      message: 'event 1: missing required attribute "type"',
      attribute: 'type',
      index: 1,
    });
    expect(await endOffsets()).toBe(before);
  });

  it('answers 404 for an unknown topic and writes nothing', async () => {
    const response = await post(
      JSON.stringify({ specversion: '1.0', id: 'x', source: '/s', type: 't' }),
      { 'content-type': ce },
      '?topic=no-such-topic',
    );
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ code: 'UNKNOWN_TOPIC', topic: 'no-such-topic' });
  });

  it('passes every route but /health through the request gate', async () => {
    await fetch(`${instance.url}/health`);
    await fetch(`${instance.url}/subscriptions`);
    expect(gate.seen).toEqual(expect.arrayContaining(['POST /events/publish', 'GET /subscriptions']));
    expect(gate.seen).not.toContain('GET /health');
  });
});

import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { frameAdaptors } from '../../apps/gateway/src/publish/frame-adaptors';
import { PublishRoute } from '../../apps/gateway/src/publish/publish-route';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { type AdaptorRegistry, type EventFrame, type RequestFrameAdaptor } from '@libs/frame';
import { EventIngress } from '@libs/ingress';
import { EventProducer, PartitionReader } from '@libs/kafka';
import { producerOptionsOf } from '@libs/runtime';
import { TopicNamespace } from '@libs/topics';
import { DeliveryStack, openDeliveryStack, webhookSubscriptionFromEnd } from '../support/delivery-stack';
import { uniqueTopic } from '../support/env';
import { headerTenantGate } from '../support/header-tenant-gate';
import { waitFor } from '../support/wait-for';
import { WebhookReceiver } from '../support/webhook-receiver';

const TOY_TYPE = 'application/x-toy';

/**
 * A made-up protocol, written only here: `key=value` lines (`id`, `source`, `type` are the frame's header, any other
 * key an attribute), an empty line, then the data as it is (its content type in a `content` line). It converts
 * straight to the frame, and knows nothing of CloudEvents.
 */
const toyAdaptor: RequestFrameAdaptor = {
  name: 'toy',
  mediaTypes: [TOY_TYPE],
  json: false,
  batch: false,
  eventsIn: () => 1,
  decode(message) {
    const body = message.body ?? Buffer.alloc(0);
    const end = body.indexOf('\n\n');
    const head = body.subarray(0, end === -1 ? body.length : end).toString('utf8');
    const fields = new Map<string, string>();
    for (const line of head.split('\n')) {
      const at = line.indexOf('=');
      if (at < 1) throw new EventMeshError(ErrorCode.InvalidRequest, `toy line "${line}" is not key=value`, { line });
      fields.set(line.slice(0, at), line.slice(at + 1));
    }
    const header = (name: string) => {
      const value = fields.get(name);
      if (!value) throw new EventMeshError(ErrorCode.InvalidRequest, `toy field "${name}" is missing`, { field: name });
      fields.delete(name);
      return value;
    };
    const frame: EventFrame = { id: header('id'), source: header('source'), type: header('type'), extensions: {} };
    const content = fields.get('content');
    fields.delete('content');
    if (content !== undefined) frame.datacontenttype = content;
    for (const [name, value] of fields) frame.extensions[name] = value;
    if (end !== -1) frame.data = body.subarray(end + 2);
    return [frame];
  },
  encode(frame) {
    const lines = [`id=${frame.id}`, `source=${frame.source}`, `type=${frame.type}`];
    for (const [name, value] of Object.entries(frame.extensions)) lines.push(`${name}=${String(value)}`);
    if (frame.datacontenttype !== undefined) lines.push(`content=${frame.datacontenttype}`);
    const body = Buffer.concat([Buffer.from(`${lines.join('\n')}\n\n`), frame.data ?? Buffer.alloc(0)]);
    return { headers: { 'content-type': TOY_TYPE }, body };
  },
};

/**
 * Adding a protocol touches only its adaptor and its registration: the gateway's own publish route
 * (publish-route.ts, unchanged) with the gateway's registry (frame-adaptors.ts) plus the toy adaptor takes a toy
 * request, and the event lands on Kafka as a CloudEvents record (the Kafka binding's binary mode) that a webhook
 * subscriber, through the real dispatch loop, receives as a CloudEvent. Real Postgres, Kafka and sink on loopback.
 */
describe('a protocol added through the FrameAdaptor SPI (toy adaptor, real Kafka)', () => {
  const topic = uniqueTopic('frame-toy');
  let stack: DeliveryStack;
  let producer: EventProducer;
  let reader: PartitionReader;
  const sink = new WebhookReceiver();
  const servers: Server[] = [];
  let stop: () => Promise<unknown>;

  /** The real publish route on a loopback server, reading with `adaptors`. */
  async function serve(adaptors: AdaptorRegistry): Promise<string> {
    const ingress = new EventIngress(
      TopicNamespace.fromConfig(stack.db, stack.topics, stack.config),
      producer,
      topic,
      100,
    );
    const route = new PublishRoute({
      ingress,
      gate: headerTenantGate('ingress'),
      defaultTopic: topic,
      bodyLimitBytes: 65536,
      adaptors,
    });
    const server = createServer((request, response) => route.handle(request, response) || response.destroy());
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/events/publish?topic=${topic}`;
  }

  beforeAll(async () => {
    stack = await openDeliveryStack('frame-adaptor-toy-spec', topic, 1, 5000);
    producer = new EventProducer(stack.kafka, stack.topics, producerOptionsOf(stack.config));
    await producer.connect();
    reader = new PartitionReader(stack.kafka);
    await reader.connect();
    await sink.start();
    // A webhook subscriber from the end of the log, delivered to by the real dispatch loop.
    ({ stop } = await webhookSubscriptionFromEnd(stack, reader, topic, sink.url!, 'toy'));
  });

  afterAll(async () => {
    await stop?.();
    for (const server of servers) await new Promise((resolve) => server.close(resolve));
    await sink.stop();
    await reader?.disconnect();
    await producer?.disconnect();
    await stack?.close();
  });

  const toyRequest = (id: string) => ({
    method: 'POST',
    headers: { 'content-type': TOY_TYPE },
    body: `id=${id}\nsource=/toy\ntype=toy.said\ncolor=blue\ncontent=text/plain\n\nhello, toy`,
  });

  it('without its registration the route refuses the toy content type (415), and writes nothing', async () => {
    const url = await serve(frameAdaptors());
    const ends = await stack.topics.endOffsets(topic);
    const response = await fetch(url, toyRequest(`toy-${randomUUID()}`));
    expect(response.status).toBe(415);
    expect(await response.json()).toMatchObject({
      code: ErrorCode.UnsupportedMediaType,
      accepted: expect.not.arrayContaining([TOY_TYPE]) as unknown,
    });
    expect(await stack.topics.endOffsets(topic)).toEqual(ends);
  });

  it('registered, a toy publish lands on Kafka as a CloudEvents record and the subscriber receives the CloudEvent', async () => {
    const url = await serve(frameAdaptors().register(toyAdaptor));
    const id = `toy-${randomUUID()}`;
    const response = await fetch(url, toyRequest(id));
    expect(response.status).toBe(202);
    const receipt = (await response.json()) as { id: string; partition: number; offset: number };
    expect(receipt.id).toBe(id);

    // The record, in the CloudEvents Kafka binding (binary mode): what any binding consumer reads.
    const [fetched] = await reader.fetch([{ topic, partition: receipt.partition, offset: receipt.offset }], {
      maxWaitMs: 1000,
    });
    const record = fetched.records[0];
    const text = (v: unknown) => (Buffer.isBuffer(v) ? v.toString() : String(v));
    expect(Object.fromEntries(Object.entries(record.headers).map(([k, v]) => [k, text(v)]))).toEqual({
      ce_specversion: '1.0',
      ce_id: id,
      ce_source: '/toy',
      ce_type: 'toy.said',
      ce_color: 'blue',
      'content-type': 'text/plain',
    });
    expect(record.value!.toString()).toBe('hello, toy');

    // The subscriber: a CloudEvent in the HTTP binary mode, the data untouched.
    const delivered = await waitFor(
      'the toy event at the subscriber',
      () => sink.requests.find((r) => r.headers['ce-id'] === id),
      { timeoutMs: 60000 },
    );
    expect(delivered.headers).toMatchObject({
      'ce-specversion': '1.0',
      'ce-source': '/toy',
      'ce-type': 'toy.said',
      'ce-color': 'blue',
      'content-type': 'text/plain',
    });
    expect(delivered.body.toString()).toBe('hello, toy');
  });

  it("refuses a malformed toy request with the adaptor's 400, and writes nothing", async () => {
    const url = await serve(frameAdaptors().register(toyAdaptor));
    const ends = await stack.topics.endOffsets(topic);
    const response = await fetch(url, { ...toyRequest('x'), body: 'id=x\nsource=/toy\n\nno type' });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: ErrorCode.InvalidRequest, field: 'type' });
    expect(await stack.topics.endOffsets(topic)).toEqual(ends);
  });
});

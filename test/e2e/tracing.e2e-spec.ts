import { randomBytes, randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { parseTraceparent } from '@libs/tracing';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { OtlpReceiver, ReceivedSpan } from '../support/otlp-receiver';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';
import { ReceivedRequest, WebhookReceiver } from '../support/webhook-receiver';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/**
 * W3C trace context end to end, on real instance processes and the real servers: a `traceparent` sent on publish
 * arrives at a loopback webhook sink in the same trace. With tracing off the sink gets it unchanged; with tracing
 * on it gets the delivery span's context, and the spans reach a loopback OTLP collector with the chain
 * caller -> publish -> delivery, and the Temporal SDK's spans (dispatch workflow start, its activity) in one trace.
 */
describe('tracing, end to end', () => {
  const receiver = new WebhookReceiver();
  const collector = new OtlpReceiver();
  const plainId = `e2e-trace-off-${randomUUID().slice(0, 8)}`;
  const tracedId = `e2e-trace-on-${randomUUID().slice(0, 8)}`;
  const plainTopic = uniqueTopic('trace-off');
  const tracedTopic = uniqueTopic('trace-on');
  let plain: InstanceProcess;
  let traced: InstanceProcess;
  let plainApi: string;
  let tracedApi: string;
  let tracedSubscription: string;
  let temporal: { client: Client; close(): Promise<void> };

  const subscribe = async (api: string, topic: string) => {
    const created = await fetch(`${api}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink: receiver.url, topic }),
    });
    expect(created.status).toBe(201);
    return ((await created.json()) as { id: string }).id;
  };
  const publish = async (
    api: string,
    topic: string,
    headers: Record<string, string>,
    event: Record<string, unknown> = {},
  ) => {
    const id = randomUUID();
    const response = await fetch(`${api}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', ...headers },
      body: JSON.stringify({
        specversion: '1.0',
        id,
        source: '/e2e/tracing',
        type: 'e2e.traced',
        data: { n: 1 },
        ...event,
      }),
    });
    expect(response.status).toBe(202);
    return id;
  };
  const deliveryOf = (id: string) =>
    waitFor(`the sink to receive event ${id}`, () =>
      receiver.requests.find((r: ReceivedRequest) => r.headers['ce-id'] === id),
    );
  const span = (what: string, test: (s: ReceivedSpan) => boolean, timeoutMs = 60000) =>
    waitFor(`the collector to receive ${what}`, () => collector.spans.find(test), { timeoutMs });

  beforeAll(async () => {
    await receiver.start();
    await collector.start();
    plain = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: plainId,
      EVENTMESH_KAFKA_TOPICS: plainTopic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
    });
    traced = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: tracedId,
      EVENTMESH_KAFKA_TOPICS: tracedTopic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
      EVENTMESH_TRACING_ENABLED: 'true',
      EVENTMESH_TRACING_OTLP_ENDPOINT: collector.url!,
      EVENTMESH_TRACING_SERVICE_NAME: 'eventmesh-e2e',
    });
    [plainApi, tracedApi] = await Promise.all([plain.ready(), traced.ready()]);
    temporal = await temporalClient();
  });

  afterAll(async () => {
    const exits = await Promise.all([plain?.stop(), traced?.stop()]);
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(plainId), dispatchWorkflowIdOf(tracedId)]);
    await temporal?.close();
    await receiver.stop();
    await collector.stop();
    expect(exits.map((e) => e?.code)).toEqual([0, 0]);
  });

  describe('tracing off (the default)', () => {
    beforeAll(async () => {
      await subscribe(plainApi, plainTopic);
    });

    it("carries the publisher's traceparent and tracestate to the webhook unchanged", async () => {
      const traceparent = `00-${hex(16)}-${hex(8)}-01`;
      const id = await publish(plainApi, plainTopic, { traceparent, tracestate: 'vendor=abc,other=1' });
      const delivery = await deliveryOf(id);
      expect(delivery.headers).toMatchObject({
        traceparent,
        tracestate: 'vendor=abc,other=1',
        'ce-traceparent': traceparent,
      });
    });

    it("prefers the event's own traceparent extension over the request's header", async () => {
      const own = `00-${hex(16)}-${hex(8)}-01`;
      const id = await publish(
        plainApi,
        plainTopic,
        { traceparent: `00-${hex(16)}-${hex(8)}-01` },
        { traceparent: own },
      );
      expect((await deliveryOf(id)).headers).toMatchObject({ traceparent: own, 'ce-traceparent': own });
    });

    it('ignores a malformed traceparent (header or extension): the event is accepted and carries none', async () => {
      const header = await publish(plainApi, plainTopic, {
        traceparent: `00-${'0'.repeat(32)}-${hex(8)}-01`,
        tracestate: 'vendor=abc',
      });
      const extension = await publish(
        plainApi,
        plainTopic,
        {},
        { traceparent: 'not-a-traceparent', tracestate: 'vendor=abc' },
      );
      for (const id of [header, extension]) {
        const { headers } = await deliveryOf(id);
        expect([headers.traceparent, headers.tracestate, headers['ce-traceparent'], headers['ce-tracestate']]).toEqual([
          undefined,
          undefined,
          undefined,
          undefined,
        ]);
      }
    });
  });

  describe('tracing on, exported to an OTLP collector', () => {
    beforeAll(async () => {
      tracedSubscription = await subscribe(tracedApi, tracedTopic);
    });

    it("continues the publisher's trace: the webhook carries the delivery span, child of the publish span, child of the caller", async () => {
      const caller = { traceId: hex(16), spanId: hex(8) };
      const id = await publish(tracedApi, tracedTopic, {
        traceparent: `00-${caller.traceId}-${caller.spanId}-01`,
        tracestate: 'vendor=abc',
      });
      const { headers } = await deliveryOf(id);
      const header = parseTraceparent(headers.traceparent);
      const event = parseTraceparent(headers['ce-traceparent']);
      // Same trace, another parent: the delivery span's.
      expect(header).toMatchObject({ traceId: caller.traceId, flags: 1 });
      expect(event).toMatchObject({ traceId: caller.traceId });
      expect(header!.spanId).not.toBe(caller.spanId);
      expect(headers.tracestate).toBe('vendor=abc');

      const delivery = await span('the delivery span', (s) => s.spanId === header!.spanId);
      expect(delivery).toMatchObject({
        traceId: caller.traceId,
        name: `deliver ${tracedTopic}`,
        attributes: expect.objectContaining({
          'eventmesh.subscription.id': tracedSubscription,
          'eventmesh.delivery.transport': 'webhook',
          'eventmesh.delivery.outcome': 'delivered',
          'http.response.status_code': 200,
          'cloudevents.event_id': id,
        }),
        resource: expect.objectContaining({ 'service.name': 'eventmesh-e2e', 'service.instance.id': tracedId }),
      });
      // The chain: delivery -> the event's context (the publish span) -> the caller's span.
      const published = await span('the publish span', (s) => s.spanId === delivery.parentSpanId);
      expect(published).toMatchObject({
        traceId: caller.traceId,
        name: `publish ${tracedTopic}`,
        parentSpanId: caller.spanId,
        spanId: event!.spanId,
      });
      expect(published.attributes).toMatchObject({
        'messaging.destination.name': tracedTopic,
        'cloudevents.event_id': id,
      });
      // No payloads: no attribute holds the event's data.
      for (const s of [delivery, published]) expect(JSON.stringify(s.attributes)).not.toContain('"n":1');
    }, 180000);

    it('starts a trace for an event published without trace context, and still delivers in it', async () => {
      const id = await publish(tracedApi, tracedTopic, { traceparent: 'garbage' });
      const { headers } = await deliveryOf(id);
      const header = parseTraceparent(headers.traceparent);
      expect(parseTraceparent(headers['ce-traceparent'])?.traceId).toBe(header?.traceId);
      const delivery = await span('the delivery span of the untraced event', (s) => s.spanId === header!.spanId);
      const published = await span('its publish span', (s) => s.spanId === delivery.parentSpanId);
      expect(published.parentSpanId ?? '').toBe('');
    }, 180000);

    it("traces the instance's Temporal calls: the dispatch workflow start and, in the same trace, its activity", async () => {
      const start = await span(
        "the client's StartWorkflow span",
        (s) => s.name === 'StartWorkflow:instanceDispatchWorkflow' && s.resource['service.instance.id'] === tracedId,
      );
      // The activity runs until the instance stops; its span is exported when it ends, at the latest at shutdown.
      const exit = await traced.stop();
      expect(exit.code).toBe(0);
      const activity = await span(
        "the dispatch activity's RunActivity span",
        (s) => s.name.startsWith('RunActivity:') && s.traceId === start.traceId,
        60000,
      );
      expect(activity.parentSpanId).toBeTruthy();
    }, 180000);
  });
});

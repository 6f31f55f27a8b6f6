import { randomBytes } from 'node:crypto';
import { OtlpReceiver } from '../../test/support/otlp-receiver';
import type { EventFrame } from '@libs/frame';
import { OtelTracing } from './otel-tracing';
import { parseTraceparent } from './trace-context';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const frame = (id: string, extensions: EventFrame['extensions'] = {}): EventFrame => ({
  id,
  source: '/orders',
  type: 'order.created',
  extensions: { ...extensions },
  data: Buffer.from('{"secret":"payload"}'),
});

/**
 * The OpenTelemetry tracing's spans, exported over OTLP/HTTP to a collector on a loopback port: which span is
 * whose parent, what an event and a webhook carry, and what the spans say (never the data).
 */
describe('OtelTracing', () => {
  const collector = new OtlpReceiver();
  let tracing: OtelTracing;

  beforeAll(async () => {
    await collector.start();
  });
  beforeEach(() => {
    collector.spans.length = 0;
    tracing = OtelTracing.start(
      { enabled: true, otlpEndpoint: collector.url!, serviceName: 'spec', sampleRatio: 1 },
      'spec-instance',
    );
  });
  afterAll(() => collector.stop());

  it("makes the publish span a child of the request's context, stamps the events with it, and the delivery span a child of the event's", async () => {
    const caller = { traceId: hex(16), spanId: hex(8) };
    const events = [frame('e1'), frame('e2')];
    const answer = await tracing.publish(
      'orders',
      events,
      { traceparent: `00-${caller.traceId}-${caller.spanId}-01`, tracestate: 'v=1' },
      async () => 'acked',
    );
    expect(answer).toBe('acked');
    const stamped = parseTraceparent(events[0].extensions.traceparent)!;
    expect(stamped.traceId).toBe(caller.traceId);
    expect(events[1].extensions).toEqual({ traceparent: events[0].extensions.traceparent, tracestate: 'v=1' });

    const delivery = tracing.startDelivery({ id: 'sub-1', topic: 'orders' }, events[0], 'webhook')!;
    const header = parseTraceparent(delivery.headers.traceparent)!;
    expect(header.traceId).toBe(caller.traceId);
    expect(header.spanId).not.toBe(stamped.spanId);
    expect(delivery.headers.tracestate).toBe('v=1');
    delivery.end('failed', { status: 503, error: 'HTTP 503' });
    await tracing.shutdown();

    const publish = collector.spans.find((s) => s.name === 'publish orders')!;
    expect(publish).toMatchObject({ traceId: caller.traceId, parentSpanId: caller.spanId, spanId: stamped.spanId });
    expect(publish.attributes).toMatchObject({
      'messaging.destination.name': 'orders',
      'messaging.batch.message_count': 2,
    });
    const deliver = collector.spans.find((s) => s.name === 'deliver orders')!;
    expect(deliver).toMatchObject({
      traceId: caller.traceId,
      parentSpanId: stamped.spanId,
      spanId: header.spanId,
      status: { code: 2, message: 'HTTP 503' },
    });
    expect(deliver.attributes).toMatchObject({
      'eventmesh.subscription.id': 'sub-1',
      'eventmesh.delivery.transport': 'webhook',
      'eventmesh.delivery.outcome': 'failed',
      'http.response.status_code': 503,
      'cloudevents.event_id': 'e1',
    });
    expect(deliver.resource).toMatchObject({ 'service.name': 'spec', 'service.instance.id': 'spec-instance' });
    expect(JSON.stringify(collector.spans)).not.toContain('payload');
  });

  it("leaves an event's own context in place and links it from the batch's publish span", async () => {
    const own = { traceId: hex(16), spanId: hex(8) };
    const events = [frame('e1', { traceparent: `00-${own.traceId}-${own.spanId}-01` }), frame('e2')];
    await tracing.publish('orders', events, undefined, async () => undefined);
    expect(events[0].extensions.traceparent).toBe(`00-${own.traceId}-${own.spanId}-01`);
    await tracing.shutdown();
    const publish = collector.spans.find((s) => s.name === 'publish orders') as unknown as {
      parentSpanId?: string;
      links?: { traceId: string; spanId: string }[];
    };
    expect(publish.parentSpanId ?? '').toBe('');
    expect(publish.links).toEqual([expect.objectContaining({ traceId: own.traceId, spanId: own.spanId })]);
  });

  it("makes a single event's publish span a child of the request's context, linked to the event's own", async () => {
    const own = { traceId: hex(16), spanId: hex(8) };
    const caller = { traceId: hex(16), spanId: hex(8) };
    await tracing.publish(
      'orders',
      [frame('e1', { traceparent: `00-${own.traceId}-${own.spanId}-01` })],
      { traceparent: `00-${caller.traceId}-${caller.spanId}-01` },
      async () => undefined,
    );
    await tracing.shutdown();
    const publish = collector.spans.find((s) => s.name === 'publish orders') as unknown as {
      traceId: string;
      parentSpanId?: string;
      links?: { traceId: string; spanId: string }[];
    };
    expect(publish).toMatchObject({ traceId: caller.traceId, parentSpanId: caller.spanId });
    expect(publish.links).toEqual([expect.objectContaining({ traceId: own.traceId, spanId: own.spanId })]);
  });

  it("continues a single event's own context when the request has none", async () => {
    const own = { traceId: hex(16), spanId: hex(8) };
    await tracing.publish(
      'orders',
      [frame('e1', { traceparent: `00-${own.traceId}-${own.spanId}-01` })],
      undefined,
      async () => undefined,
    );
    await tracing.shutdown();
    expect(collector.spans.find((s) => s.name === 'publish orders')).toMatchObject({
      traceId: own.traceId,
      parentSpanId: own.spanId,
    });
  });

  it('follows an unsampled caller: the trace continues (flags 00), nothing is recorded', async () => {
    const caller = { traceId: hex(16), spanId: hex(8) };
    const events = [frame('e1')];
    await tracing.publish(
      'orders',
      events,
      { traceparent: `00-${caller.traceId}-${caller.spanId}-00` },
      async () => undefined,
    );
    expect(parseTraceparent(events[0].extensions.traceparent)).toMatchObject({ traceId: caller.traceId, flags: 0 });
    tracing.startDelivery({ id: 'sub-1', topic: 'orders' }, events[0], 'stream')!.end('delivered');
    // A sampled one beside it is exported: only its span arrives.
    await tracing.publish(
      'sampled',
      [frame('e2')],
      { traceparent: `00-${hex(16)}-${hex(8)}-01` },
      async () => undefined,
    );
    await tracing.shutdown();
    expect(collector.spans.map((s) => s.name)).toEqual(['publish sampled']);
  });

  it('marks a publish that fails and passes its error on', async () => {
    await expect(
      tracing.publish('orders', [frame('e1')], undefined, () => Promise.reject(new Error('broker down'))),
    ).rejects.toThrow('broker down');
    await tracing.shutdown();
    expect(collector.spans.find((s) => s.name === 'publish orders')?.status).toMatchObject({
      code: 2,
      message: 'broker down',
    });
  });

  describe('without an exporter (spans not recorded, contexts carried on)', () => {
    const unexported = (sampleRatio: number) =>
      OtelTracing.start({ enabled: true, otlpEndpoint: '', serviceName: 'spec', sampleRatio }, 'spec-instance');

    it.each([
      ['sampled', '01'],
      ['not sampled', '00'],
    ])(
      'continues a %s caller: the events carry its trace and flag under a span id of the publish, a webhook under one of the delivery',
      async (_, flags) => {
        const tracing = unexported(1);
        const caller = { traceId: hex(16), spanId: hex(8) };
        const events = [frame('e1'), frame('e2')];
        await tracing.publish(
          'orders',
          events,
          { traceparent: `00-${caller.traceId}-${caller.spanId}-${flags}`, tracestate: 'v=1' },
          async () => 'acked',
        );
        const stamped = parseTraceparent(events[0].extensions.traceparent)!;
        expect(stamped).toMatchObject({ traceId: caller.traceId, flags: parseInt(flags, 16) });
        expect(stamped.spanId).not.toBe(caller.spanId);
        expect(events[1].extensions).toEqual({ traceparent: events[0].extensions.traceparent, tracestate: 'v=1' });
        const delivery = tracing.startDelivery({ id: 'sub-1', topic: 'orders' }, events[0], 'webhook')!;
        const header = parseTraceparent(delivery.headers.traceparent)!;
        expect(header).toMatchObject({ traceId: caller.traceId, flags: parseInt(flags, 16) });
        expect([caller.spanId, stamped.spanId]).not.toContain(header.spanId);
        expect(delivery.headers.tracestate).toBe('v=1');
        delivery.end('delivered');
        await tracing.shutdown();
      },
    );

    it.each([
      [1, 1],
      [0, 0],
    ])('starts a trace for a request without one, sampled as the ratio %s says', async (ratio, flags) => {
      const tracing = unexported(ratio);
      const event = frame('e1');
      await tracing.publish('orders', [event], undefined, async () => 'acked');
      const stamped = parseTraceparent(event.extensions.traceparent)!;
      expect(stamped.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(stamped.traceId).not.toBe('0'.repeat(32));
      expect(stamped.flags).toBe(flags);
      await tracing.shutdown();
    });
  });
});

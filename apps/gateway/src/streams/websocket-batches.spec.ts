import type { EventFrame } from '@libs/frame';
import type { StreamDelivery } from '@libs/streams';
import { batchedPush } from './websocket-batches';
import { toWire, wireJsonOf } from './streams.controller';

const delivery = (n: number, data: string | undefined, datacontenttype?: string): StreamDelivery => ({
  deliveryId: `3.ab12cd34.${n}`,
  frame: {
    id: `e"${n}`,
    source: '/orders',
    type: 'order.created',
    subject: 'é\n',
    datacontenttype,
    extensions: { partitionkey: 'k', seq: n, flag: true },
    data: data === undefined ? undefined : Buffer.from(data),
  } satisfies EventFrame,
});

describe('stream deliveries on the wire', () => {
  const deliveries = [
    delivery(1, ' {"orderId": 1, "lines": [1, 2]}\n', 'application/json'),
    delivery(2, '{broken', 'application/json'),
    delivery(3, 'plain "text"', 'text/plain'),
    delivery(4, undefined),
  ];

  it('writes one delivery as the JSON of its wire object, with the members given before it', () => {
    for (const d of deliveries) {
      expect(JSON.parse(wireJsonOf(d))).toEqual(toWire(d));
      expect(JSON.parse(wireJsonOf(d, '"type":"event",'))).toEqual({ type: 'event', ...toWire(d) });
    }
  });

  it('sends the deliveries pushed in one turn as one events message, in order', async () => {
    const sent: string[] = [];
    const push = batchedPush({ send: (data: string | Buffer) => sent.push(String(data)) } as never);
    deliveries.forEach(push);
    expect(sent).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    push(deliveries[0]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent.map((m) => JSON.parse(m) as unknown)).toEqual([
      { type: 'events', deliveries: deliveries.map(toWire) },
      { type: 'events', deliveries: [toWire(deliveries[0])] },
    ]);
  });
});

import { attributesOf, frameFromAttributes, frameToStructured } from './cloudevent-attributes';
import type { EventFrame } from './event-frame';
import { frameToHttpBinary } from './http-binary.codec';
import { frameFromKafkaRecord, frameToKafkaMessage } from './kafka-record.codec';

const frame: EventFrame = {
  id: 'e-1',
  source: '/orders',
  type: 'order.created',
  subject: 'o-9',
  time: '2026-11-29T10:00:00Z',
  datacontenttype: 'application/json',
  extensions: { partitionkey: 'customer-7', region: 'eu' },
  data: Buffer.from('{"total":12}'),
};

describe('Kafka record codec (CloudEvents Kafka binding, binary mode)', () => {
  it('writes ce_ headers, content-type, the data as value and partitionkey as key', () => {
    const message = frameToKafkaMessage(frame);
    expect(message.key).toBe('customer-7');
    expect(message.value).toEqual(frame.data);
    expect(message.headers).toEqual({
      ce_specversion: '1.0',
      ce_id: 'e-1',
      ce_source: '/orders',
      ce_type: 'order.created',
      ce_subject: 'o-9',
      ce_time: '2026-11-29T10:00:00Z',
      ce_partitionkey: 'customer-7',
      ce_region: 'eu',
      'content-type': 'application/json',
    });
  });

  it('keys by source when there is no partitionkey', () => {
    expect(frameToKafkaMessage({ ...frame, extensions: {} }).key).toBe('/orders');
  });

  it('reads back what it wrote (headers arrive as bytes)', () => {
    const message = frameToKafkaMessage(frame);
    const headers = Object.fromEntries(Object.entries(message.headers!).map(([k, v]) => [k, Buffer.from(String(v))]));
    expect(frameFromKafkaRecord(headers, message.value as Buffer)).toEqual(frame);
  });

  it('refuses a record that is not a CloudEvent', () => {
    expect(() => frameFromKafkaRecord({ foo: Buffer.from('bar') }, Buffer.from('x'))).toThrow('not a binary-mode');
  });
});

describe('HTTP binary codec', () => {
  it('writes ce- headers and percent-encodes what the binding requires', () => {
    const { headers, body } = frameToHttpBinary({ ...frame, subject: 'Grüße "x" 100%' });
    expect(headers['ce-id']).toBe('e-1');
    expect(headers['ce-subject']).toBe('Gr%C3%BC%C3%9Fe%20%22x%22%20100%25');
    expect(headers['content-type']).toBe('application/json');
    expect(body).toEqual(frame.data);
  });
});

describe("the publishing request id (EventFrame.requestId, the runtime's own)", () => {
  const published: EventFrame = { ...frame, requestId: 'req-7' };

  it('travels in the Kafka record and comes back from it', () => {
    const message = frameToKafkaMessage(published);
    const headers = Object.fromEntries(Object.entries(message.headers!).map(([k, v]) => [k, Buffer.from(String(v))]));
    expect(frameFromKafkaRecord(headers, message.value as Buffer).requestId).toBe('req-7');
  });

  it('is never an attribute of the event: not in its stored attributes, its structured form, or its HTTP headers', () => {
    expect(attributesOf(published)).not.toHaveProperty('requestId');
    expect(frameToStructured(published)).not.toHaveProperty('requestId');
    expect(Object.keys(frameToHttpBinary(published).headers).filter((h) => /request/i.test(h))).toEqual([]);
    expect(frameFromAttributes(attributesOf(published), null).extensions).toEqual(frame.extensions);
  });
});

import { EventMeshError } from '@libs/errors';
import { frameFromStructured } from './cloudevent.adaptor';

const valid = { specversion: '1.0', id: 'e-1', source: '/orders', type: 'order.created' };

function errorOf(body: unknown): EventMeshError {
  try {
    frameFromStructured(body);
  } catch (e) {
    return e as EventMeshError;
  }
  throw new Error('expected the adaptor to refuse the event');
}

describe('frameFromStructured', () => {
  it.each(['id', 'source', 'type', 'specversion'])('refuses an event without "%s", naming it', (attribute) => {
    const body: Record<string, unknown> = { ...valid };
    delete body[attribute];
    const e = errorOf(body);
    expect(e).toBeInstanceOf(EventMeshError);
    expect(e.code).toBe('INVALID_CLOUDEVENT');
    expect(e.details).toEqual({ attribute });
    expect(e.message).toBe(`missing required attribute "${attribute}"`);
  });

  it('refuses other spec versions', () => {
    expect(errorOf({ ...valid, specversion: '0.3' }).details).toEqual({ attribute: 'specversion' });
  });

  // Found by the API fuzzer: `"time": ""` was accepted (the library reads it as absent) and the event kept it.
  it('refuses an empty time', () => {
    expect(errorOf({ ...valid, time: '' }).details).toEqual({ attribute: 'time' });
  });

  it('refuses a malformed time through the cloudevents library', () => {
    const e = errorOf({ ...valid, time: 'yesterday' });
    expect(e.details).toEqual({ attribute: 'time' });
  });

  it('refuses non-objects', () => {
    expect(errorOf([valid]).code).toBe('INVALID_CLOUDEVENT');
    expect(errorOf('x').code).toBe('INVALID_CLOUDEVENT');
  });

  it('keeps JSON data as bytes with an application/json content type', () => {
    const frame = frameFromStructured({ ...valid, data: { total: 12 } });
    expect(frame.datacontenttype).toBe('application/json');
    expect(JSON.parse(frame.data!.toString())).toEqual({ total: 12 });
  });

  it('decodes data_base64', () => {
    const frame = frameFromStructured({ ...valid, datacontenttype: 'application/octet-stream', data_base64: 'AQID' });
    expect([...frame.data!]).toEqual([1, 2, 3]);
  });

  it('keeps text data of a non-JSON content type as it is', () => {
    const frame = frameFromStructured({ ...valid, datacontenttype: 'text/plain', data: 'hello' });
    expect(frame.data!.toString()).toBe('hello');
  });

  it('carries extensions and optional attributes', () => {
    const frame = frameFromStructured({ ...valid, subject: 'o-9', partitionkey: 'customer-7', priority: 3 });
    expect(frame.subject).toBe('o-9');
    expect(frame.extensions).toEqual({ partitionkey: 'customer-7', priority: 3 });
  });

  // Found by the API fuzzer: `"0": 9007199254740992` was accepted (the library checks only that it is whole).
  it('refuses an extension number beyond the CloudEvents Integer range, and takes its bounds', () => {
    expect(errorOf({ ...valid, big: 2 ** 53 }).details).toEqual({ attribute: 'big' });
    expect(errorOf({ ...valid, big: 2147483648 }).details).toEqual({ attribute: 'big' });
    expect(errorOf({ ...valid, small: -2147483649 }).details).toEqual({ attribute: 'small' });
    const frame = frameFromStructured({ ...valid, big: 2147483647, small: -2147483648 });
    expect(frame.extensions).toEqual({ big: 2147483647, small: -2147483648 });
  });

  // Found by the API fuzzer: `"data_base64": null` was accepted, and the event published without data.
  it('refuses a data_base64 that is not a string, the falsy ones the library skips too', () => {
    for (const data_base64 of [null, 0, false])
      expect(errorOf({ ...valid, data_base64 }).details).toEqual({ attribute: 'data_base64' });
  });

  it('refuses an extension that is an object', () => {
    expect(errorOf({ ...valid, meta: { a: 1 } }).details).toEqual({ attribute: 'meta' });
  });

  // Found by the property "what the adaptor accepts survives the Kafka round trip unchanged" (seed 90068):
  // `{"id": "\ud800"}` was accepted and came back from Kafka as "\ufffd".
  it('refuses an attribute holding a lone surrogate, which Kafka would store as U+FFFD', () => {
    expect(errorOf({ ...valid, id: '\ud800' }).details).toEqual({ attribute: 'id' });
    expect(errorOf({ ...valid, subject: 'a\udc00' }).details).toEqual({ attribute: 'subject' });
    expect(errorOf({ ...valid, note: 'x\ud83d' }).details).toEqual({ attribute: 'note' });
    // A pair is one character, and is fine.
    expect(frameFromStructured({ ...valid, subject: '\ud83d\ude00' }).subject).toBe('\u{1F600}');
  });
});

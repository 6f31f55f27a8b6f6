import { EventMeshError } from '../errors';
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

import { ErrorCode, EventMeshError } from '@libs/errors';
import { AdaptorRegistry } from './adaptor-registry';
import { cloudEventsBatch, cloudEventsBinary, cloudEventsStructured } from './cloudevent-frame-adaptors';

const registry = () => new AdaptorRegistry([cloudEventsStructured, cloudEventsBatch, cloudEventsBinary]);

function refusal(f: () => unknown): EventMeshError {
  try {
    f();
  } catch (e) {
    if (e instanceof EventMeshError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}

describe('AdaptorRegistry (the CloudEvents adaptors)', () => {
  it('picks by media type, whatever its case and parameters', () => {
    const found = registry().adaptorFor(
      { 'content-type': 'Application/CloudEvents+JSON; charset=utf-8' },
      { batch: true },
    );
    expect(found).toBe(cloudEventsStructured);
    expect(registry().adaptorFor({ 'content-type': 'application/cloudevents-batch+json' }, { batch: true })).toBe(
      cloudEventsBatch,
    );
  });

  it('picks the adaptor a header selects over the media type (binary mode with a JSON body)', () => {
    const headers = { 'content-type': 'application/json', 'ce-specversion': '1.0' };
    expect(registry().adaptorFor(headers, { batch: true })).toBe(cloudEventsBinary);
  });

  it('refuses a batch where the route takes none, and an unknown type, with the 415 naming what is accepted', () => {
    const batch = refusal(() =>
      registry().adaptorFor({ 'content-type': 'application/cloudevents-batch+json' }, { batch: false }),
    );
    expect({ code: batch.code, message: batch.message, details: batch.details }).toEqual({
      code: ErrorCode.UnsupportedMediaType,
      message:
        'content type "application/cloudevents-batch+json" is not accepted here without ce-* headers; send application/cloudevents+json, application/json, any type with ce-* headers (binary mode)',
      details: {
        accepted: ['application/cloudevents+json', 'application/json', 'any type with ce-* headers (binary mode)'],
      },
    });
    const none = refusal(() => registry().adaptorFor({}, { batch: true }));
    expect(none.message).toBe(
      'content type "(none)" is not accepted here without ce-* headers; send application/cloudevents+json, application/json, application/cloudevents-batch+json, any type with ce-* headers (binary mode)',
    );
  });

  it('refuses a second adaptor for a media type or header another reads', () => {
    expect(() => registry().register({ ...cloudEventsStructured, name: 'again' })).toThrow(
      'frame adaptor again: cloudevents-structured reads application/cloudevents+json already',
    );
    expect(() => registry().register({ ...cloudEventsBinary, name: 'again' })).toThrow(
      'frame adaptor again: cloudevents-binary reads ce-specversion already',
    );
  });

  it('lists the media types read as JSON (the body parsers parse those)', () => {
    expect(registry().jsonMediaTypes()).toEqual([
      'application/cloudevents+json',
      'application/json',
      'application/cloudevents-batch+json',
    ]);
  });
});

describe('the CloudEvents adaptors encode', () => {
  const frame = {
    id: 'e-1',
    source: '/orders',
    type: 'order.created',
    datacontenttype: 'application/json',
    extensions: { partitionkey: 'k' },
    data: Buffer.from('{"total":12}'),
  };

  it('for HTTP in their content mode, specversion written by the adaptor', () => {
    const structured = cloudEventsStructured.encode(frame, 'http');
    expect(structured.headers).toEqual({ 'content-type': 'application/cloudevents+json; charset=utf-8' });
    expect(JSON.parse(structured.body!.toString())).toEqual({
      partitionkey: 'k',
      id: 'e-1',
      source: '/orders',
      type: 'order.created',
      specversion: '1.0',
      datacontenttype: 'application/json',
      data: { total: 12 },
    });
    expect(JSON.parse(cloudEventsBatch.encode(frame, 'http').body!.toString())).toHaveLength(1);
    const binary = cloudEventsBinary.encode(frame, 'http');
    expect(binary.headers['ce-specversion']).toBe('1.0');
    expect(binary.body).toBe(frame.data);
  });

  it('for Kafka in the Kafka binding, binary mode, whichever mode', () => {
    for (const adaptor of [cloudEventsStructured, cloudEventsBatch, cloudEventsBinary]) {
      const record = adaptor.encode(frame, 'kafka');
      expect(record.headers).toEqual({
        ce_specversion: '1.0',
        ce_id: 'e-1',
        ce_source: '/orders',
        ce_type: 'order.created',
        ce_partitionkey: 'k',
        'content-type': 'application/json',
      });
      expect(record.body).toBe(frame.data);
    }
  });
});

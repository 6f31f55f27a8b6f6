import fc from 'fast-check';
import type { IHeaders } from 'kafkajs';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { frameFromBinary, frameFromStructured, framesFromBatch } from './cloudevent.adaptor';
import { contextAttributes, frameToStructured } from './cloudevent-attributes';
import type { EventFrame } from './event-frame';
import { frameToHttpBinary } from './http-binary.codec';
import { frameFromKafkaRecord, frameToKafkaMessage } from './kafka-record.codec';
import { structuredJsonBytesOf, structuredJsonOf } from './structured-json';

/**
 * Round trips of the frame through its codecs over generated frames (fast-check, fixed seeds; each property runs
 * in a fraction of a second).
 */

const RESERVED = new Set([
  'id',
  'source',
  'type',
  'specversion',
  'subject',
  'time',
  'datacontenttype',
  'dataschema',
  'data',
]);

/** CloudEvents strings: any Unicode characters but controls, and surrogates only in pairs (fast-check's `string`
 * with the full-Unicode unit never makes a lone surrogate). */
const ceString = (minLength = 0) =>
  fc.string({ unit: 'grapheme', minLength, maxLength: 12 }).filter((s) => !/\p{Cc}/u.test(s));
const extensionName = fc.stringMatching(/^[a-z0-9]{1,12}$/).filter((n) => !RESERVED.has(n));

function frameArbitrary(extensionValue: fc.Arbitrary<string | number | boolean>): fc.Arbitrary<EventFrame> {
  return fc.record(
    {
      id: ceString(1),
      // The adaptor (the cloudevents library) wants a URI-reference.
      source: fc.oneof(fc.webUrl(), fc.stringMatching(/^\/[a-z0-9/._-]{0,12}$/)),
      type: ceString(1),
      subject: ceString(1),
      time: fc
        .date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true })
        .map((d) => d.toISOString()),
      datacontenttype: fc.constantFrom(
        'application/json',
        'text/plain',
        'application/octet-stream',
        'application/cloudevents+json',
      ),
      dataschema: fc.webUrl(),
      extensions: fc.dictionary(extensionName, extensionValue, { maxKeys: 4 }),
      data: fc.uint8Array({ maxLength: 32 }).map((b) => Buffer.from(b)),
    },
    { requiredKeys: ['id', 'source', 'type', 'extensions'] },
  );
}

/** kafkajs hands headers to a consumer as bytes. */
const asReceived = (headers: IHeaders) =>
  Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, Buffer.from(String(v))]));

describe('frame codec round trips (fast-check, fixed seeds)', () => {
  it('frame -> Kafka record -> frame is the identity (binary mode carries extensions as strings)', () => {
    fc.assert(
      fc.property(frameArbitrary(ceString()), (frame) => {
        const message = frameToKafkaMessage(frame);
        expect(frameFromKafkaRecord(asReceived(message.headers!), (message.value as Buffer | null) ?? null)).toEqual(
          frame,
        );
      }),
      { seed: 90061, numRuns: 300 },
    );
  });

  it('frame -> Kafka record -> frame keeps number and boolean extensions as their text', () => {
    fc.assert(
      fc.property(frameArbitrary(fc.oneof(fc.integer(), fc.boolean(), fc.double({ noNaN: true }))), (frame) => {
        const message = frameToKafkaMessage(frame);
        const back = frameFromKafkaRecord(asReceived(message.headers!), (message.value as Buffer | null) ?? null);
        const asText = Object.fromEntries(Object.entries(frame.extensions).map(([k, v]) => [k, String(v)]));
        expect(back).toEqual({ ...frame, extensions: asText });
      }),
      { seed: 90062, numRuns: 300 },
    );
  });

  it('frame -> Kafka record writes the context attributes as the HTTP binding does, as ce_ headers in the same order', () => {
    fc.assert(
      fc.property(frameArbitrary(fc.oneof(ceString(), fc.integer(), fc.boolean())), (frame) => {
        const expected: [string, string][] = contextAttributes(frame).map(([name, value]) => [`ce_${name}`, value]);
        if (frame.datacontenttype !== undefined) expected.push(['content-type', frame.datacontenttype]);
        expect(Object.entries(frameToKafkaMessage(frame).headers!)).toEqual(expected);
      }),
      { seed: 90073, numRuns: 300 },
    );
  });

  it('frame -> HTTP binary -> frame is the identity for the frames the adaptor accepts', () => {
    fc.assert(
      fc.property(frameArbitrary(ceString()), (frame) => {
        const { headers, body } = frameToHttpBinary(frame);
        const back = frameFromBinary(headers, body);
        // An empty body is no data in HTTP; a frame without data content type gets none either.
        const expected = { ...frame };
        if (expected.data !== undefined && expected.data.length === 0) delete expected.data;
        expect(back).toEqual(expected);
      }),
      { seed: 90063, numRuns: 500 },
    );
  });

  it('structuredJsonOf and its bytes are the JSON of frameToStructured, for JSON data as written by anyone and for any other data', () => {
    // JSON data as a client may send it (spaced, escaped, nested), bytes that are not JSON, text, or none.
    const data = fc.oneof(
      fc
        .jsonValue({ maxDepth: 3 })
        .chain((v) => fc.constantFrom(0, 2).map((indent) => Buffer.from(` ${JSON.stringify(v, null, indent)}\n`))),
      fc.uint8Array({ maxLength: 32 }).map((b) => Buffer.from(b)),
      ceString().map((t) => Buffer.from(t)),
      fc.constant(undefined),
    );
    const frame = frameArbitrary(fc.oneof(ceString(), fc.integer(), fc.boolean())).chain((f) =>
      fc
        .tuple(data, fc.constantFrom(undefined, 'application/json', 'text/plain', 'application/x+json; charset=utf-8'))
        .map(([d, type]) => ({ ...f, data: d, datacontenttype: type ?? f.datacontenttype })),
    );
    fc.assert(
      fc.property(frame, (f) => {
        const text = structuredJsonOf(f);
        expect(JSON.parse(text)).toEqual(frameToStructured(f));
        expect(structuredJsonBytesOf(f).toString('utf8')).toBe(text);
      }),
      { seed: 90065, numRuns: 500 },
    );
  });

  it('structured JSON -> frame -> structured JSON -> frame is stable', () => {
    const body = frameArbitrary(fc.oneof(ceString(), fc.integer(), fc.boolean())).chain((frame) =>
      fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constant(undefined)).map((data) => {
        const { data: _bytes, ...attributes } = frameToStructured({ ...frame, data: undefined });
        const json = { ...attributes, datacontenttype: 'application/json' } as Record<string, unknown>;
        if (data !== undefined) json.data = data;
        return json;
      }),
    );
    fc.assert(
      fc.property(body, (json) => {
        const once = frameFromStructured(JSON.parse(JSON.stringify(json)));
        const twice = frameFromStructured(JSON.parse(JSON.stringify(frameToStructured(once))));
        expect(twice).toEqual(once);
      }),
      { seed: 90064, numRuns: 300 },
    );
  });
});

describe('ingress adaptors on arbitrary input (fast-check, fixed seeds)', () => {
  /** Refusals are EventMeshError(InvalidCloudEvent), a 400 with a body; anything else would be a 500. */
  function acceptsOrRefuses(run: () => unknown): void {
    try {
      run();
    } catch (e) {
      expect(e).toBeInstanceOf(EventMeshError);
      expect((e as EventMeshError).code).toBe(ErrorCode.InvalidCloudEvent);
    }
  }

  const attribute = fc.constantFrom(
    'id',
    'source',
    'type',
    'specversion',
    'subject',
    'time',
    'datacontenttype',
    'dataschema',
    'data',
    'data_base64',
    'ext',
    '__proto__',
    'constructor',
  );
  const loose = fc.dictionary(
    attribute,
    fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('1.0', '/s', 'x', '2026-01-01T00:00:00Z')),
    { maxKeys: 10 },
  );
  const near = fc
    .record({ specversion: fc.constant('1.0'), id: fc.string(), source: fc.constant('/s'), type: fc.string() })
    .chain((base) => loose.map((rest) => ({ ...base, ...rest })));

  it('structured: any JSON is a frame or an InvalidCloudEvent refusal', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue({ maxDepth: 3 }), loose, near), (body) =>
        acceptsOrRefuses(() => frameFromStructured(body)),
      ),
      { seed: 90065, numRuns: 1000 },
    );
  });

  it('structured: what the adaptor accepts survives the Kafka round trip unchanged', () => {
    // Any UTF-16 units, lone surrogates among them (JSON.parse makes one from "\ud800").
    const unit = fc
      .oneof(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0xd800, max: 0xdfff }))
      .map((c) => String.fromCharCode(c));
    const text = fc.string({ unit, minLength: 1, maxLength: 6 });
    const body = fc.record({ subject: text, ext: text, type: text, id: text });
    fc.assert(
      fc.property(body, (attributes) => {
        let frame: EventFrame;
        try {
          frame = frameFromStructured({ specversion: '1.0', source: '/s', ...attributes });
        } catch (e) {
          expect(e).toBeInstanceOf(EventMeshError);
          return;
        }
        const message = frameToKafkaMessage(frame);
        expect(frameFromKafkaRecord(asReceived(message.headers!), null)).toEqual(frame);
      }),
      { seed: 90068, numRuns: 1000 },
    );
  });

  it('batch: any JSON is frames or an InvalidCloudEvent refusal', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.array(fc.oneof(loose, near), { maxLength: 4 })), (body) =>
        acceptsOrRefuses(() => framesFromBatch(body, 3)),
      ),
      { seed: 90066, numRuns: 500 },
    );
  });

  it('binary: any headers and body are a frame or an InvalidCloudEvent refusal', () => {
    const header = fc.oneof(
      attribute.map((a) => `ce-${a}`),
      fc.constantFrom('content-type', 'CE-ID', 'x-other'),
    );
    const value = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.constantFrom('%', '%E0%A4%A', '%zz', '1.0', '/s'),
      fc.array(fc.string(), { maxLength: 2 }),
    );
    fc.assert(
      fc.property(
        fc.dictionary(header, value, { maxKeys: 8 }),
        fc.option(
          fc.uint8Array({ maxLength: 8 }).map((b) => Buffer.from(b)),
          { nil: undefined },
        ),
        (headers, body) =>
          acceptsOrRefuses(() =>
            frameFromBinary(
              { 'ce-specversion': '1.0', 'ce-id': '1', 'ce-source': '/s', 'ce-type': 't', ...headers },
              body,
            ),
          ),
      ),
      { seed: 90067, numRuns: 1000 },
    );
  });
});

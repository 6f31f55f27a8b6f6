import validateV1Schema from 'cloudevents/dist/schema/v1';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { CE_SPECVERSION, REQUIRED_ATTRIBUTES } from './cloudevent-attributes';
import { EventFrame, ExtensionValue, OPTIONAL_ATTRIBUTES } from './event-frame';

/** With the `u` flag a surrogate pair is one code point, so this finds only unpaired surrogates. */
const LONE_SURROGATE = /\p{Surrogate}/u;

/** Attributes that are not extensions: the context attributes and the data. */
const NOT_EXTENSIONS = new Set<string>([...REQUIRED_ATTRIBUTES, ...OPTIONAL_ATTRIBUTES, 'data', 'data_base64']);

/**
 * Properties the `cloudevents` library's `CloudEvent` constructor takes as its own (not extensions): its
 * extension checks skip them.
 */
const LIBRARY_PROPERTIES = new Set<string>([...NOT_EXTENSIONS, 'datacontentencoding', 'schemaurl']);

/**
 * The CloudEvents type system's Integer: a whole number from -2^31 to 2^31 - 1. The library checks only that an
 * extension number is whole, so 2^53 would pass it; a binary-mode consumer could not hold it as an Integer.
 */
export const CE_INTEGER_MIN = -2147483648;
export const CE_INTEGER_MAX = 2147483647;

/** The library's rule for an extension name and value (`CloudEvent` constructor, strict). */
const EXTENSION_NAME = /^[a-z0-9]+$/;
const libraryAcceptsExtensionValue = (v: unknown) =>
  typeof v === 'boolean' ||
  Number.isInteger(v) ||
  typeof v === 'string' ||
  typeof v === 'object' ||
  v instanceof Date ||
  ArrayBuffer.isView(v);

/**
 * Adaptor: a CloudEvent in the HTTP structured JSON mode (the parsed body of an
 * `application/cloudevents+json` request) to an {@link EventFrame}. Validation is the `cloudevents` library's
 * rules, after a presence check of the required attributes, because the library fills in a missing `id` or
 * `specversion` itself and a publisher must hear that its event lacked them.
 *
 * The library's rules are applied without building a `CloudEvent` (a copy of the event, a `delete` per
 * attribute, a frozen instance): that cost more than the rest of the adaptor together, per event of a batch.
 * What the constructor checks is checked here in its order (data_base64 decodable by `atob`, no `schemaurl` in
 * 1.0, extension names and value types), then the library's own compiled JSON schema of CloudEvents 1.0 runs on
 * the attributes it would see; every refusal carries the library's message. A property test holds this to the
 * library (codecs.properties.spec.ts: the adaptor agrees with `new CloudEvent`).
 */
export function frameFromStructured(body: unknown): EventFrame {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalid('a structured CloudEvent must be a JSON object', {});
  }
  const input = body as Record<string, unknown>;
  for (const name of REQUIRED_ATTRIBUTES) {
    const value = input[name];
    if (value === undefined || value === null || value === '') {
      throw invalid(`missing required attribute "${name}"`, { attribute: name });
    }
    if (typeof value !== 'string') {
      throw invalid(`attribute "${name}" must be a string`, { attribute: name });
    }
  }
  if (input.specversion !== CE_SPECVERSION) {
    throw invalid(`unsupported specversion "${String(input.specversion)}"; this runtime accepts "${CE_SPECVERSION}"`, {
      attribute: 'specversion',
    });
  }
  for (const name in input) {
    // CloudEvents strings allow surrogates only in pairs; a lone one cannot be written as UTF-8 (a Kafka header)
    // and would come back as U+FFFD, so the event delivered would differ from the one acknowledged.
    const value = input[name];
    if (name !== 'data' && typeof value === 'string' && LONE_SURROGATE.test(value)) {
      throw invalid(`attribute "${name}" is not valid Unicode: it holds an unpaired surrogate`, { attribute: name });
    }
  }
  if (input.data !== undefined && input.data_base64 !== undefined) {
    throw invalid('an event carries "data" or "data_base64", not both', { attribute: 'data_base64' });
  }
  validateAsTheLibrary(input);

  const extensions: Record<string, ExtensionValue> = {};
  for (const name in input) {
    if (NOT_EXTENSIONS.has(name)) continue;
    const value = input[name];
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw invalid(`extension attribute "${name}" must be a string, number or boolean`, { attribute: name });
    }
    if (typeof value === 'number' && (value < CE_INTEGER_MIN || value > CE_INTEGER_MAX)) {
      throw invalid(
        `extension attribute "${name}" is beyond the CloudEvents Integer range (${CE_INTEGER_MIN} to ${CE_INTEGER_MAX})`,
        { attribute: name },
      );
    }
    extensions[name] = value;
  }

  const frame: EventFrame = {
    id: input.id as string,
    source: input.source as string,
    type: input.type as string,
    extensions,
  };
  for (const name of OPTIONAL_ATTRIBUTES) {
    const value = input[name];
    if (value !== undefined) {
      if (typeof value !== 'string') throw invalid(`attribute "${name}" must be a string`, { attribute: name });
      // The library puts the current time in place of an empty one, but the frame would carry "" on: refused.
      if (name === 'time' && value === '')
        throw invalid('attribute "time" must be a timestamp, not empty', { attribute: name });
      frame[name] = value;
    }
  }
  // The library skips a falsy data_base64 (null, 0, false): the event would go out without the data it named.
  if (input.data_base64 !== undefined && typeof input.data_base64 !== 'string') {
    throw invalid('attribute "data_base64" must be a string', { attribute: 'data_base64' });
  }
  if (typeof input.data_base64 === 'string') {
    frame.data = Buffer.from(input.data_base64, 'base64');
  } else if (input.data !== undefined) {
    const isJson = frame.datacontenttype === undefined || /[/+]json(;|$)/.test(frame.datacontenttype);
    if (isJson) {
      frame.data = Buffer.from(JSON.stringify(input.data));
      frame.datacontenttype ??= 'application/json';
    } else if (typeof input.data === 'string') {
      frame.data = Buffer.from(input.data, 'utf8');
    } else {
      throw invalid(`"data" must be a string when datacontenttype is "${frame.datacontenttype}"`, {
        attribute: 'data',
      });
    }
  }
  return frame;
}

/**
 * What `new CloudEvent(input, true)` of the `cloudevents` library (10.x) refuses, in its order and with its
 * messages; the required attributes are present, strings, and `specversion` is "1.0" by now.
 */
function validateAsTheLibrary(input: Record<string, unknown>): void {
  // The constructor decodes a truthy data_base64 with atob, which throws on what is not base64.
  if (input.data_base64) {
    try {
      atob(input.data_base64 as string);
    } catch (e) {
      throw invalid(e instanceof Error ? e.message : String(e), {});
    }
  }
  if (input.schemaurl) throw invalid('cannot set schemaurl on version 1.0 event', {});
  for (const name in input) {
    if (LIBRARY_PROPERTIES.has(name)) continue;
    // The library's messages run over several lines; the first is the reason.
    if (!EXTENSION_NAME.test(name)) throw invalid(`invalid extension name: ${name}`.split('\n')[0], {});
    const value = input[name];
    if (!libraryAcceptsExtensionValue(value))
      throw invalid(`invalid extension value: ${String(value)}`.split('\n')[0], {});
  }
  // The attributes as the constructor holds them: a missing or empty `time` becomes the current time (valid).
  const attributes = {
    id: input.id,
    source: input.source,
    specversion: input.specversion,
    type: input.type,
    datacontenttype: input.datacontenttype,
    dataschema: input.dataschema,
    subject: input.subject,
    time: input.time || undefined,
    data_base64: input.data_base64,
  };
  if (!validateV1Schema(attributes)) {
    const first = (validateV1Schema as unknown as { errors?: { instancePath?: string; message?: string }[] })
      .errors?.[0];
    const attribute = (first?.instancePath ?? '').replace(/^\//, '') || undefined;
    throw invalid(`attribute "${attribute ?? '?'}" ${first?.message ?? 'is invalid'}`, { attribute });
  }
}

/**
 * Adaptor: the HTTP binary content mode. Context attributes come from `ce-*` headers (percent-decoded), the data
 * content type from `content-type`, the data is the body as it is.
 */
export function frameFromBinary(
  headers: Record<string, string | string[] | undefined>,
  body: Buffer | undefined,
): EventFrame {
  const attributes: Record<string, unknown> = {};
  for (const [name, raw] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!lower.startsWith('ce-') || raw === undefined) continue;
    const value = Array.isArray(raw) ? raw[0] : raw;
    try {
      attributes[lower.slice(3)] = decodeURIComponent(value);
    } catch {
      throw invalid(`header "${name}" is not validly percent-encoded`, { attribute: lower.slice(3) });
    }
  }
  const contentType = headers['content-type'];
  if (contentType !== undefined) attributes.datacontenttype = Array.isArray(contentType) ? contentType[0] : contentType;
  for (const name of REQUIRED_ATTRIBUTES) {
    if (attributes[name] === undefined || attributes[name] === '') {
      throw invalid(`missing required attribute "${name}" (header ce-${name})`, { attribute: name });
    }
  }
  const frame = frameFromStructured(attributes);
  if (body !== undefined && body.length > 0) frame.data = body;
  return frame;
}

/**
 * Adaptor: the HTTP batch content mode, a JSON array of structured events. Every event is validated before any
 * is accepted; the first invalid one is reported with its `index`.
 */
export function framesFromBatch(body: unknown, maxEvents: number): EventFrame[] {
  if (!Array.isArray(body)) throw invalid('a CloudEvents batch must be a JSON array of events', {});
  if (body.length === 0) throw invalid('a CloudEvents batch must hold at least one event', {});
  if (body.length > maxEvents) {
    throw invalid(`a CloudEvents batch holds at most ${maxEvents} events; this one holds ${body.length}`, {
      limit: maxEvents,
    });
  }
  return body.map((event, index) => {
    try {
      return frameFromStructured(event);
    } catch (e) {
      if (e instanceof EventMeshError) {
        throw new EventMeshError(e.code, `event ${index}: ${e.message}`, { ...e.details, index });
      }
      throw e;
    }
  });
}

function invalid(message: string, details: Record<string, unknown>): EventMeshError {
  return new EventMeshError(ErrorCode.InvalidCloudEvent, message, details);
}

import { CloudEvent, ValidationError } from 'cloudevents';
import { ErrorCode, EventMeshError } from '../errors';
import { EventFrame, ExtensionValue, OPTIONAL_ATTRIBUTES, REQUIRED_ATTRIBUTES } from './event-frame';

/** With the `u` flag a surrogate pair is one code point, so this finds only unpaired surrogates. */
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * Adaptor: a CloudEvent in the HTTP structured JSON mode (the parsed body of an
 * `application/cloudevents+json` request) to an {@link EventFrame}. Validation is the `cloudevents` library's,
 * after a presence check of the required attributes, because the library fills in a missing `id` or
 * `specversion` itself and a publisher must hear that its event lacked them.
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
  if (input.specversion !== '1.0') {
    throw invalid(`unsupported specversion "${String(input.specversion)}"; this runtime accepts "1.0"`, {
      attribute: 'specversion',
    });
  }
  for (const [name, value] of Object.entries(input)) {
    // CloudEvents strings allow surrogates only in pairs; a lone one cannot be written as UTF-8 (a Kafka header)
    // and would come back as U+FFFD, so the event delivered would differ from the one acknowledged.
    if (name !== 'data' && typeof value === 'string' && LONE_SURROGATE.test(value)) {
      throw invalid(`attribute "${name}" is not valid Unicode: it holds an unpaired surrogate`, { attribute: name });
    }
  }
  if (input.data !== undefined && input.data_base64 !== undefined) {
    throw invalid('an event carries "data" or "data_base64", not both', { attribute: 'data_base64' });
  }

  let event: CloudEvent<unknown>;
  try {
    event = new CloudEvent(input as never, true);
  } catch (e) {
    throw fromValidationError(e);
  }

  const extensions: Record<string, ExtensionValue> = {};
  const known = new Set<string>([...REQUIRED_ATTRIBUTES, ...OPTIONAL_ATTRIBUTES, 'data', 'data_base64']);
  for (const [name, value] of Object.entries(input)) {
    if (known.has(name)) continue;
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw invalid(`extension attribute "${name}" must be a string, number or boolean`, { attribute: name });
    }
    extensions[name] = value;
  }

  const frame: EventFrame = {
    id: event.id,
    source: event.source,
    type: event.type,
    specversion: '1.0',
    extensions,
  };
  for (const name of OPTIONAL_ATTRIBUTES) {
    const value = input[name];
    if (value !== undefined) {
      if (typeof value !== 'string') throw invalid(`attribute "${name}" must be a string`, { attribute: name });
      frame[name] = value;
    }
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
 * Adaptor: the HTTP binary content mode. Context attributes come from `ce-*` headers (percent-decoded), the data
 * content type from `content-type`, the data is the body as it is.
 */
export function frameFromBinary(headers: Record<string, string | string[] | undefined>, body: Buffer | undefined): EventFrame {
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
    throw invalid(`a CloudEvents batch holds at most ${maxEvents} events; this one holds ${body.length}`, { limit: maxEvents });
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

function fromValidationError(e: unknown): EventMeshError {
  if (e instanceof ValidationError) {
    const first = (e.errors ?? [])[0] as { instancePath?: string; message?: string } | string | undefined;
    if (first && typeof first === 'object') {
      const attribute = (first.instancePath ?? '').replace(/^\//, '') || undefined;
      return invalid(`attribute "${attribute ?? '?'}" ${first.message ?? 'is invalid'}`, { attribute });
    }
    return invalid(e.message.split('\n')[0], {});
  }
  return invalid(e instanceof Error ? e.message : String(e), {});
}

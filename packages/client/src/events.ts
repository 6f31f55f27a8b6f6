import { randomUUID } from 'node:crypto';
import { CloudEvent, type CloudEventV1 } from 'cloudevents';

/** What `publish` takes: a `CloudEvent` of the `cloudevents` package, or its attributes (id and specversion may be left out). */
export type EventInput = CloudEvent<unknown> | Partial<CloudEventV1<unknown>>;

/**
 * The event in the CloudEvents JSON format, as its JSON text: `id` a fresh UUID and `specversion` `1.0` when missing,
 * `source` the client's default when missing, binary data as `data_base64`. The id is fixed here, once, so every
 * retry of the publish sends the same id and subscribers can dedupe.
 */
export function structuredJson(event: EventInput, defaultSource?: string): string {
  // An event that is complete as given is written as it is (no copy: a publish of many events makes no garbage per event).
  if (!(event instanceof CloudEvent) && isComplete(event, defaultSource)) return JSON.stringify(event);
  const attrs: Record<string, unknown> = event instanceof CloudEvent ? { ...event.toJSON() } : { ...event };
  attrs.id ??= randomUUID();
  attrs.specversion ??= '1.0';
  if (attrs.source === undefined && defaultSource !== undefined) attrs.source = defaultSource;
  const bytes = bytesOf(attrs.data);
  if (bytes) {
    attrs.data_base64 = bytes.toString('base64');
    delete attrs.data;
  }
  return JSON.stringify(attrs);
}

/** Whether `event` has what the JSON format needs (id, specversion, a source) and no binary data to encode. */
function isComplete(event: Partial<CloudEventV1<unknown>>, defaultSource?: string): boolean {
  return (
    event.id !== undefined &&
    event.specversion !== undefined &&
    (event.source !== undefined || defaultSource === undefined) &&
    bytesOf(event.data) === undefined
  );
}

/** Binary data as its bytes (any typed array, a DataView, an ArrayBuffer); undefined for any other data. */
function bytesOf(data: unknown): Buffer | undefined {
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  return undefined;
}

/** The attributes `CloudEvent`'s constructor sets, in its order; any other key of an event is an extension. */
const ATTRIBUTES = [
  'id',
  'time',
  'type',
  'source',
  'specversion',
  'datacontenttype',
  'subject',
  'datacontentencoding',
  'dataschema',
  'data_base64',
  'schemaurl',
  'data',
] as const;
const IS_ATTRIBUTE = new Set<string>(ATTRIBUTES);

let stampedAt = 0;
let stamp = '';
/** The time now as the constructor writes it (ISO 8601, milliseconds), made once per millisecond. */
function nowIso(): string {
  const now = Date.now();
  if (now !== stampedAt) [stampedAt, stamp] = [now, new Date(now).toISOString()];
  return stamp;
}

/**
 * A structured CloudEvent the runtime sent, as a `CloudEvent` (not re-validated: the runtime validated it at
 * publish). An event with an id and JSON data (no `data_base64`) is made as the constructor makes it (the same own
 * properties in the same order, a missing time stamped with the moment it is made, a missing specversion 1.0,
 * frozen) without the constructor's copy of the input and a delete per attribute, which left each event a slow
 * dictionary object and was a tenth of a consumer's CPU per event; any other event goes through the constructor.
 */
export function cloudEventOf(json: Record<string, unknown>): CloudEvent<unknown> {
  if (typeof json.id !== 'string' || json.id === '' || json.data_base64 !== undefined)
    return new CloudEvent<unknown>(json as CloudEventV1<unknown>, false);
  const event = Object.create(CloudEvent.prototype) as Record<string, unknown>;
  for (const name of ATTRIBUTES) event[name] = json[name];
  event.time ||= nowIso();
  event.specversion ||= '1.0';
  for (const name in json) if (Object.hasOwn(json, name) && !IS_ATTRIBUTE.has(name)) event[name] = json[name];
  return Object.freeze(event) as unknown as CloudEvent<unknown>;
}

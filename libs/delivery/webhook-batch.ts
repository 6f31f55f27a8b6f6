import { EventFrame, frameToStructured, OPTIONAL_ATTRIBUTES } from '@libs/frame';

/** The content type of a CloudEvents batch (the HTTP binding's batched content mode): a JSON array of events. */
export const BATCH_CONTENT_TYPE = 'application/cloudevents-batch+json';

/**
 * A webhook subscription's `config.batch` (opt-in): its events go out in CloudEvents batch content mode, one POST
 * holding up to `maxEvents` events and `maxBytes` bytes of body, and a batch that is not full waits at most
 * `lingerMs` after its oldest event was published for more to arrive. Bounds and defaults: the subscription schema
 * (libs/subscriptions/subscription.schema.ts) and docs/delivery.md.
 */
export interface BatchSettings {
  maxEvents: number;
  maxBytes: number;
  lingerMs: number;
}

export const BATCH_DEFAULTS: BatchSettings = { maxEvents: 100, maxBytes: 262_144, lingerMs: 0 };
/** The largest `maxEvents`: a lane buffers at most EVENTMESH_DELIVERY_POLL_BATCH_MAX_EVENTS (500 by default). */
export const BATCH_MAX_EVENTS = 500;
export const BATCH_MIN_BYTES = 1024;
export const BATCH_MAX_BYTES = 1_048_576;
export const BATCH_MAX_LINGER_MS = 10_000;

/** The subscription's batch settings, each absent one its default; undefined when it delivers event by event. */
export function batchSettingsOf(target: { protocol?: string; config?: unknown }): BatchSettings | undefined {
  if (target.protocol === 'STREAM') return undefined;
  const own = (target.config as { batch?: Partial<BatchSettings> } | undefined)?.batch;
  return own ? { ...BATCH_DEFAULTS, ...own } : undefined;
}

/**
 * One event in structured JSON mode, as it stands in a batch body: what `frameToStructured` gives, but JSON data
 * that parses goes in as its own bytes rather than parsed and written again (a third of the cost per event of
 * 1 KiB: docs/benchmarks.md). Data of a JSON type that does not parse goes as `data_base64`, as there.
 */
export function batchEntryOf(frame: EventFrame): Buffer {
  const data = frame.data;
  if (data === undefined || !JSON_TYPE.test(frame.datacontenttype ?? 'application/json') || !parses(data))
    return Buffer.from(JSON.stringify(frameToStructured(frame)));
  // One buffer written in place, not the attributes' own buffer concatenated with the data's.
  const head = `${attributesJsonOf(frame)},"data":`;
  const headBytes = Buffer.byteLength(head);
  const entry = Buffer.allocUnsafe(headBytes + data.length + 1);
  entry.write(head, 0);
  data.copy(entry, headBytes);
  entry[entry.length - 1] = CLOSE_BRACE;
  return entry;
}

/**
 * The members of `attributesOf(frame)` as JSON, without the closing brace: written member by member, not through
 * the intermediate object (its rest spread and entries were 5 µs of a 1 KiB event's cost in a profile).
 */
function attributesJsonOf(frame: EventFrame): string {
  let out = `{"specversion":"1.0","id":${JSON.stringify(frame.id)},"source":${JSON.stringify(frame.source)},"type":${JSON.stringify(frame.type)}`;
  for (const name of OPTIONAL_ATTRIBUTES) {
    const value = frame[name];
    if (value !== undefined) out += `,"${name}":${JSON.stringify(value)}`;
  }
  for (const name in frame.extensions) out += `,${JSON.stringify(name)}:${JSON.stringify(frame.extensions[name])}`;
  return out;
}

const JSON_TYPE = /[/+]json(;|$)/;

function parses(data: Buffer): boolean {
  try {
    JSON.parse(data.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

/** The batch body: the entries as one JSON array, byte for byte (the signature covers exactly these bytes). */
export function batchBodyOf(entries: Buffer[]): Buffer {
  const parts: Buffer[] = [OPEN];
  entries.forEach((entry, i) => {
    if (i > 0) parts.push(COMMA);
    parts.push(entry);
  });
  parts.push(CLOSE);
  return Buffer.concat(parts);
}

/** A batch body's size for entries of `entryBytes` bytes in all, `count` of them. */
export const batchBytesOf = (entryBytes: number, count: number): number => entryBytes + Math.max(0, count - 1) + 2;

const OPEN = Buffer.from('[');
const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']');
const CLOSE_BRACE = 0x7d;

import { jsonArrayBytesOf, structuredJsonBytesOf, type EventFrame } from '@libs/frame';

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

/** A batch as it goes out: each event in structured JSON (`entries`, what a webhook is sent) and as its frame. */
export interface OutBatch {
  entries: Buffer[];
  frames: EventFrame[];
}

/** The subscription's batch settings, each absent one its default; undefined when it delivers event by event. */
export function batchSettingsOf(target: { config?: unknown }): BatchSettings | undefined {
  const own = (target.config as { batch?: Partial<BatchSettings> } | undefined)?.batch;
  return own ? { ...BATCH_DEFAULTS, ...own } : undefined;
}

/** One event in structured JSON mode, as it stands in a batch body (libs/frame/structured-json.ts). */
export const batchEntryOf = (frame: EventFrame): Buffer => structuredJsonBytesOf(frame);

/** The batch body: the entries as one JSON array, byte for byte (the signature covers exactly these bytes). */
export const batchBodyOf = (entries: Buffer[]): Buffer => jsonArrayBytesOf(entries);

/** A batch body's size for entries of `entryBytes` bytes in all, `count` of them. */
export const batchBytesOf = (entryBytes: number, count: number): number => entryBytes + Math.max(0, count - 1) + 2;

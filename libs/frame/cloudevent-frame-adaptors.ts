import { frameToStructured } from './cloudevent-attributes';
import { frameFromBinary, frameFromStructured, framesFromBatch } from './cloudevent.adaptor';
import type { EventFrame } from './event-frame';
import type { RequestFrameAdaptor, FrameTransport, OutboundMessage } from './frame-adaptor';
import { frameToHttpBinary } from './http-binary.codec';
import { frameToKafkaMessage } from './kafka-record.codec';

/** The media type of the HTTP batch content mode. */
export const CLOUDEVENTS_BATCH_TYPE = 'application/cloudevents-batch+json';
const STRUCTURED_TYPE = 'application/cloudevents+json';

/**
 * The CloudEvents adaptors, one per content mode of the HTTP binding, each converting directly to the frame
 * (cloudevent.adaptor.ts). On Kafka every one writes the Kafka binding's binary mode (kafka-record.codec.ts): the
 * records this runtime stores, whichever mode an event came in.
 */
export const cloudEventsStructured: RequestFrameAdaptor = {
  name: 'cloudevents-structured',
  mediaTypes: [STRUCTURED_TYPE, 'application/json'],
  json: true,
  batch: false,
  eventsIn: () => 1,
  decode: (message) => [frameFromStructured(message.parsed)],
  encode: (frame, transport) => encodeJson(frame, transport, frameToStructured(frame), STRUCTURED_TYPE),
};

/** A JSON array of structured events; every one is validated before any is accepted. */
export const cloudEventsBatch: RequestFrameAdaptor = {
  name: 'cloudevents-batch',
  mediaTypes: [CLOUDEVENTS_BATCH_TYPE],
  json: true,
  batch: true,
  // A malformed batch counts as one event here; decode refuses it.
  eventsIn: (message) => (Array.isArray(message.parsed) ? Math.max(1, message.parsed.length) : 1),
  decode: (message, limits) => framesFromBatch(message.parsed, limits.maxBatchEvents),
  encode: (frame, transport) => encodeJson(frame, transport, [frameToStructured(frame)], CLOUDEVENTS_BATCH_TYPE),
};

/** Binary mode: any content type, selected by its `ce-specversion` header; the body is the data, untouched. */
export const cloudEventsBinary: RequestFrameAdaptor = {
  name: 'cloudevents-binary',
  mediaTypes: [],
  selectedBy: { header: 'ce-specversion', named: 'ce-* headers' },
  accepted: 'any type with ce-* headers (binary mode)',
  json: false,
  batch: false,
  eventsIn: () => 1,
  decode: (message) => [frameFromBinary(message.headers, message.body)],
  encode: (frame, transport) => (transport === 'kafka' ? kafkaRecordOf(frame) : frameToHttpBinary(frame)),
};

function encodeJson(frame: EventFrame, transport: FrameTransport, json: unknown, type: string): OutboundMessage {
  if (transport === 'kafka') return kafkaRecordOf(frame);
  return { headers: { 'content-type': `${type}; charset=utf-8` }, body: Buffer.from(JSON.stringify(json)) };
}

/** The Kafka record's headers and value (its key, the partition key, is the producer's to set). */
function kafkaRecordOf(frame: EventFrame): OutboundMessage {
  const record = frameToKafkaMessage(frame);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(record.headers ?? {})) headers[name] = String(value);
  return { headers, body: (record.value as Buffer | null) ?? undefined };
}

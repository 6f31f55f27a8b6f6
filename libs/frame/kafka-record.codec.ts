import type { IHeaders, Message } from 'kafkajs';
import { CE_SPECVERSION } from './cloudevent-attributes';
import { EventFrame, ExtensionValue, OPTIONAL_ATTRIBUTES, partitionKeyOf } from './event-frame';

/** The runtime's record header naming the request that published the event (EventFrame.requestId). */
export const REQUEST_ID_RECORD_HEADER = 'eventmesh_requestid';

/**
 * The CloudEvents Kafka protocol binding, binary content mode: context attributes in `ce_<name>` headers, the
 * data content type in `content-type`, the data as the record value, `partitionkey` (else `source`) as the
 * record key. Any Kafka tool that speaks the binding reads our records as CloudEvents. The runtime adds one header
 * of its own, `eventmesh_requestid`, when the publishing request had an id.
 */
export function frameToKafkaMessage(frame: EventFrame): Message {
  // The headers in contextAttributes' order, written straight into one object (no pairs in between): this runs
  // once per published event.
  const headers: IHeaders = {
    ce_specversion: CE_SPECVERSION,
    ce_id: frame.id,
    ce_source: frame.source,
    ce_type: frame.type,
  };
  if (frame.subject !== undefined) headers.ce_subject = frame.subject;
  if (frame.time !== undefined) headers.ce_time = frame.time;
  if (frame.dataschema !== undefined) headers.ce_dataschema = frame.dataschema;
  const extensions = frame.extensions;
  for (const name in extensions) headers[`ce_${name}`] = String(extensions[name]);
  if (frame.datacontenttype !== undefined) headers['content-type'] = frame.datacontenttype;
  if (frame.requestId !== undefined) headers[REQUEST_ID_RECORD_HEADER] = frame.requestId;
  return { key: partitionKeyOf(frame), value: frame.data ?? null, headers };
}

export class KafkaRecordError extends Error {}

/** Reads a record written by {@link frameToKafkaMessage} (or by any binary-mode CloudEvents producer). */
export function frameFromKafkaRecord(headers: IHeaders | undefined, value: Buffer | null): EventFrame {
  const attrs: Record<string, string> = {};
  let contentType: string | undefined;
  let requestId: string | undefined;
  for (const [name, raw] of Object.entries(headers ?? {})) {
    if (raw === undefined) continue;
    const text = Array.isArray(raw) ? String(raw[0]) : Buffer.isBuffer(raw) ? raw.toString('utf8') : String(raw);
    const lower = name.toLowerCase();
    if (lower === 'content-type') contentType = text;
    else if (lower.startsWith('ce_')) attrs[lower.slice(3)] = text;
    else if (lower === REQUEST_ID_RECORD_HEADER) requestId = text;
  }
  const { specversion, id, source, type, ...rest } = attrs;
  if (specversion !== CE_SPECVERSION || !id || !source || !type) {
    throw new KafkaRecordError('record is not a binary-mode CloudEvents 1.0 record');
  }
  const frame: EventFrame = { id, source, type, extensions: {} };
  for (const [name, text] of Object.entries(rest)) {
    if ((OPTIONAL_ATTRIBUTES as readonly string[]).includes(name)) {
      frame[name as (typeof OPTIONAL_ATTRIBUTES)[number]] = text;
    } else {
      frame.extensions[name] = text as ExtensionValue;
    }
  }
  if (contentType !== undefined) frame.datacontenttype = contentType;
  if (value !== null) frame.data = value;
  if (requestId !== undefined) frame.requestId = requestId;
  return frame;
}

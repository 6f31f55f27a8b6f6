import type { IHeaders, Message } from 'kafkajs';
import { CE_SPECVERSION } from './cloudevent-attributes';
import { EventFrame, partitionKeyOf } from './event-frame';

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

/**
 * Reads a record written by {@link frameToKafkaMessage} (or by any binary-mode CloudEvents producer). Header names
 * are matched without regard to case; of two that differ only in case, the later one counts. One pass over the
 * headers straight into the frame: this runs once per delivered event.
 */
export function frameFromKafkaRecord(headers: IHeaders | undefined, value: Buffer | null): EventFrame {
  const frame: EventFrame = { id: '', source: '', type: '', extensions: {} };
  let specversion: string | undefined;
  let id: string | undefined;
  let source: string | undefined;
  let type: string | undefined;
  let contentType: string | undefined;
  let requestId: string | undefined;
  for (const name in headers) {
    if (!Object.prototype.hasOwnProperty.call(headers, name)) continue;
    const raw = headers[name];
    if (raw === undefined) continue;
    const text = Array.isArray(raw) ? String(raw[0]) : Buffer.isBuffer(raw) ? raw.toString('utf8') : String(raw);
    const lower = name.toLowerCase();
    if (lower === 'content-type') contentType = text;
    else if (lower === REQUEST_ID_RECORD_HEADER) requestId = text;
    else if (lower.startsWith('ce_')) {
      const attribute = lower.slice(3);
      switch (attribute) {
        case 'specversion':
          specversion = text;
          break;
        case 'id':
          id = text;
          break;
        case 'source':
          source = text;
          break;
        case 'type':
          type = text;
          break;
        case 'subject':
        case 'time':
        case 'datacontenttype':
        case 'dataschema':
          frame[attribute] = text;
          break;
        default:
          frame.extensions[attribute] = text;
      }
    }
  }
  if (specversion !== CE_SPECVERSION || !id || !source || !type) {
    throw new KafkaRecordError('record is not a binary-mode CloudEvents 1.0 record');
  }
  frame.id = id;
  frame.source = source;
  frame.type = type;
  if (contentType !== undefined) frame.datacontenttype = contentType;
  if (value !== null) frame.data = value;
  if (requestId !== undefined) frame.requestId = requestId;
  return frame;
}

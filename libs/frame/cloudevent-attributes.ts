import { EventFrame, OPTIONAL_ATTRIBUTES } from './event-frame';

/**
 * The CloudEvents version this runtime reads and writes. It is not in the frame: the CloudEvents adaptors check it
 * on the way in (cloudevent.adaptor.ts), and every CloudEvents form of a frame written here, the Kafka record
 * (kafka-record.codec.ts) among them, carries it.
 */
export const CE_SPECVERSION = '1.0';

/** The context attributes every CloudEvent carries: the frame's header and `specversion`. */
export const REQUIRED_ATTRIBUTES = ['id', 'source', 'type', 'specversion'] as const;

/**
 * Context attributes as `name -> text` pairs, the form both the HTTP and the Kafka binary bindings carry them in
 * (`ce-<name>` headers and `ce_<name>` headers). `datacontenttype` travels as the content type instead.
 */
export function contextAttributes(frame: EventFrame): [string, string][] {
  const out: [string, string][] = [
    ['specversion', CE_SPECVERSION],
    ['id', frame.id],
    ['source', frame.source],
    ['type', frame.type],
  ];
  for (const name of OPTIONAL_ATTRIBUTES) {
    const value = frame[name];
    if (name !== 'datacontenttype' && value !== undefined) out.push([name, value]);
  }
  for (const [name, value] of Object.entries(frame.extensions)) out.push([name, String(value)]);
  return out;
}

/**
 * The frame's CloudEvents context attributes as one JSON object (its data left out), for storage beside the bytes
 * (the retry table, dead letters) and for sinks: the attributes, then the header with `specversion` after `type`.
 */
export function attributesOf(frame: EventFrame): Record<string, string | number | boolean> {
  // requestId is the runtime's, not the event's: it never becomes an attribute (sinks, the retry table, dead letters).
  const { data: _data, extensions, requestId: _requestId, id, source, type, ...optional } = frame;
  // Object.assign, not a spread: members added to a spread-made object change its hidden class the slow way
  // (measured alone: several times the cost of this whole function; see libs/delivery/lane.ts, `laneRecord`).
  const out: Record<string, string | number | boolean> = Object.assign({}, extensions);
  out.id = id;
  out.source = source;
  out.type = type;
  out.specversion = CE_SPECVERSION;
  for (const [name, value] of Object.entries(optional)) if (value !== undefined) out[name] = value;
  return out;
}

/** The inverse of {@link attributesOf}: a stored event back into a frame. */
export function frameFromAttributes(attributes: Record<string, unknown>, data: Buffer | null): EventFrame {
  const frame: EventFrame = {
    id: String(attributes.id),
    source: String(attributes.source),
    type: String(attributes.type),
    extensions: {},
  };
  for (const [name, value] of Object.entries(attributes)) {
    if (name === 'id' || name === 'source' || name === 'type' || name === 'specversion') continue;
    if ((OPTIONAL_ATTRIBUTES as readonly string[]).includes(name))
      frame[name as (typeof OPTIONAL_ATTRIBUTES)[number]] = String(value);
    else if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
      frame.extensions[name] = value;
  }
  if (data !== null) frame.data = data;
  return frame;
}

/** The frame in the HTTP structured JSON mode: JSON data as JSON, text as a string, other bytes as data_base64. */
export function frameToStructured(frame: EventFrame): Record<string, unknown> {
  const out: Record<string, unknown> = attributesOf(frame);
  if (frame.data === undefined) return out;
  const type = frame.datacontenttype ?? 'application/json';
  if (/[/+]json(;|$)/.test(type)) {
    try {
      out.data = JSON.parse(frame.data.toString('utf8'));
      return out;
    } catch {
      /* not valid JSON after all: carried as bytes below */
    }
  } else if (type.startsWith('text/')) {
    out.data = frame.data.toString('utf8');
    return out;
  }
  out.data_base64 = frame.data.toString('base64');
  return out;
}

/**
 * The one internal frame. Every ingress format converts to it through an adaptor (cloudevent.adaptor.ts), the
 * Kafka record codec (kafka-record.codec.ts) stores and reads it, and every delivery transport converts from it.
 * Data travels as bytes with its content type, so no format is re-encoded on the way through.
 */
export type ExtensionValue = string | number | boolean;

export interface EventFrame {
  id: string;
  source: string;
  type: string;
  specversion: '1.0';
  subject?: string;
  time?: string;
  datacontenttype?: string;
  dataschema?: string;
  /** Extension attributes (lower-case alphanumeric names), `partitionkey` among them when given. */
  extensions: Record<string, ExtensionValue>;
  /** The event data as bytes; absent when the event carries none. */
  data?: Buffer;
  /**
   * The runtime's own, not a CloudEvents attribute: the id of the HTTP request that published the event
   * (`x-request-id`), carried in its Kafka record (kafka-record.codec.ts) so that the delivery logs name it.
   * Not delivered to sinks, and not kept in the retry table or the dead-letter queue.
   */
  requestId?: string;
}

/** Optional context attributes, in the order bindings write them. */
export const OPTIONAL_ATTRIBUTES = ['subject', 'time', 'datacontenttype', 'dataschema'] as const;
export const REQUIRED_ATTRIBUTES = ['id', 'source', 'type', 'specversion'] as const;

/**
 * The extension naming the tenant an event of the runtime's own is about (an audit record): the runtime writes it
 * on topics no tenant publishes to, and reads it to deliver a tenant only its own events of such a topic.
 */
export const TENANT_EXTENSION = 'eventmeshtenant';

/** The record key a frame is written under: its `partitionkey` extension, else its `source`. */
export function partitionKeyOf(frame: EventFrame): string {
  const key = frame.extensions['partitionkey'];
  return key === undefined ? frame.source : String(key);
}

/**
 * Context attributes as `name -> text` pairs, the form both the HTTP and the Kafka binary bindings carry them in
 * (`ce-<name>` headers and `ce_<name>` headers). `datacontenttype` travels as the content type instead.
 */
export function contextAttributes(frame: EventFrame): [string, string][] {
  const out: [string, string][] = [
    ['specversion', frame.specversion],
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

/** The frame's context attributes as one JSON object (its data left out), for storage beside the bytes. */
export function attributesOf(frame: EventFrame): Record<string, string | number | boolean> {
  // requestId is the runtime's, not the event's: it never becomes an attribute (sinks, the retry table, dead letters).
  const { data: _data, extensions, requestId: _requestId, ...context } = frame;
  const out: Record<string, string | number | boolean> = { ...extensions };
  for (const [name, value] of Object.entries(context)) if (value !== undefined) out[name] = value;
  return out;
}

/** The inverse of {@link attributesOf}: a stored event back into a frame. */
export function frameFromAttributes(attributes: Record<string, unknown>, data: Buffer | null): EventFrame {
  const frame: EventFrame = {
    id: String(attributes.id),
    source: String(attributes.source),
    type: String(attributes.type),
    specversion: '1.0',
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

/**
 * The one internal frame, protocol-neutral: a fixed header (id, source, type; optionally subject, time, the data's
 * content type and schema), key-value attributes, and the data as bytes. Every ingress protocol converts to it
 * directly through its {@link FrameAdaptor} (frame-adaptor.ts), the Kafka record codec (kafka-record.codec.ts)
 * stores and reads it, and every delivery transport converts from it. Data travels as bytes with its content type,
 * so no format is re-encoded on the way through. Nothing of one protocol is in it: CloudEvents' `specversion` is
 * written and checked by the CloudEvents adaptors and bindings (cloudevent-attributes.ts).
 */
export type ExtensionValue = string | number | boolean;

export interface EventFrame {
  id: string;
  source: string;
  type: string;
  subject?: string;
  time?: string;
  datacontenttype?: string;
  dataschema?: string;
  /** The key-value attributes (lower-case alphanumeric names), `partitionkey` among them when given. */
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

/** The header every frame has. */
export const HEADER_ATTRIBUTES = ['id', 'source', 'type'] as const;
/** The header's optional part, in the order bindings write it. */
export const OPTIONAL_ATTRIBUTES = ['subject', 'time', 'datacontenttype', 'dataschema'] as const;

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

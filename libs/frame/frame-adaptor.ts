import type { EventFrame } from './event-frame';

/**
 * An inbound request as an adaptor reads it, whatever transport carried it: its headers (lower-case names, as
 * Node gives them), the body as received, and the body parsed once by the transport when the adaptor reads JSON.
 */
export interface InboundMessage {
  headers: Record<string, string | string[] | undefined>;
  /** The body's bytes; undefined when there is none. */
  body: Buffer | undefined;
  /** The body parsed as JSON, for an adaptor with `json: true` (a malformed body never reaches it: a 400). */
  parsed?: unknown;
}

/** A frame written for a transport: headers and body, as the protocol puts them on that transport. */
export interface OutboundMessage {
  headers: Record<string, string>;
  body: Buffer | undefined;
}

/** The transports a frame is encoded for: an HTTP request or answer, or a Kafka record's headers and value. */
export type FrameTransport = 'http' | 'kafka';

/** The bounds a decode keeps to (the runtime's, from its configuration). */
export interface DecodeLimits {
  maxBatchEvents: number;
}

/**
 * The SPI through which an external protocol converts directly to the frame and back, nothing converting through
 * another protocol: one adaptor per protocol (or per content mode of one). `In` is what the protocol's inbound side
 * hands it: an HTTP request ({@link InboundMessage}) for the adaptors of the routes that take events
 * ({@link RequestFrameAdaptor}), or a protocol's own message (A2A's task message: libs/a2a/protocol/a2a-frame.adaptor.ts).
 */
export interface FrameAdaptor<In = InboundMessage> {
  /** For logs and errors: `cloudevents-structured`. */
  readonly name: string;
  /** The inbound message's frames, every one validated; a 4xx `EventMeshError` naming what is wrong otherwise. */
  decode(inbound: In, limits: DecodeLimits): EventFrame[];
  /** One frame in this protocol, for `transport`. */
  encode(frame: EventFrame, transport: FrameTransport): OutboundMessage;
}

/**
 * An adaptor of the routes that take events over HTTP. An {@link AdaptorRegistry} picks the adaptor of a request by
 * its content type, or by a header that names the protocol whatever the content type; the routes know only the
 * registry. Adding a protocol is writing an adaptor and registering it (frame-adaptors.ts of the gateway); no route
 * changes.
 */
export interface RequestFrameAdaptor extends FrameAdaptor<InboundMessage> {
  /** The media types (lower case, without parameters) whose requests it reads. */
  readonly mediaTypes: readonly string[];
  /**
   * A header whose presence selects this adaptor whatever the content type, and how a 415 names such headers
   * (CloudEvents binary mode: `ce-specversion`, named `ce-* headers`).
   */
  readonly selectedBy?: { header: string; named: string };
  /** How a 415 names what this adaptor takes, when its media types do not say it. */
  readonly accepted?: string;
  /** Whether the transport parses the body as JSON first (`InboundMessage.parsed`). */
  readonly json: boolean;
  /** Whether a request carries a list of events, answered as a list (`{ results }`); else one, answered alone. */
  readonly batch: boolean;
  /** How many events the request carries before it is decoded (the gate charges a quota this many). */
  eventsIn(message: InboundMessage): number;
}

/** `application/cloudevents+json` from `Application/CloudEvents+JSON; charset=utf-8`. */
export function mediaTypeOf(contentType: string | string[] | undefined): string {
  const value = Array.isArray(contentType) ? contentType[0] : contentType;
  return (value ?? '').split(';')[0].trim().toLowerCase();
}

import type { EventFrame } from '@libs/frame';

/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` and `tracestate` values a request or
 * an event carries, read and checked. What is malformed is ignored, never refused: the recommendation asks a
 * vendor not to fail a request for its trace context, and the event is accepted as if it carried none.
 */

/** A trace context as it travels: an HTTP header pair, or an event's distributed-tracing extension pair. */
export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
}

/** The fields of a valid `traceparent`. */
export interface Traceparent {
  version: string;
  traceId: string;
  /** The id of the caller's span (`parent-id`). */
  spanId: string;
  /** The trace flags byte; bit 0 is `sampled`. */
  flags: number;
}

/**
 * `version-traceid-parentid-flags`, lower-case hex. Version 00 is exactly these four fields; a later version may
 * append more after a `-`, which a version-00 reader ignores (W3C trace-context, "Versioning of traceparent").
 */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/** The fields of `value` when it is a valid `traceparent`; undefined otherwise (absent, malformed, not a string). */
export function parseTraceparent(value: unknown): Traceparent | undefined {
  if (typeof value !== 'string') return undefined;
  const m = TRACEPARENT.exec(value);
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  // ff is forbidden; version 00 has nothing after the flags; ids of all zeros are invalid.
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE_ID || spanId === ZERO_SPAN_ID) return undefined;
  return { version, traceId, spanId, flags: parseInt(flags, 16) };
}

export function isValidTraceparent(value: unknown): value is string {
  return parseTraceparent(value) !== undefined;
}

/** `00-<trace-id>-<span-id>-<flags>`, the version this runtime writes. */
export function formatTraceparent(traceId: string, spanId: string, flags: number): string {
  return `00-${traceId}-${spanId}-${(flags & 0xff).toString(16).padStart(2, '0')}`;
}

/** A `tracestate` list-member key: a simple key, or `tenant@system`. */
const TRACESTATE_KEY = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$/;
/** Its value: printable ASCII but `,` and `=`, at most 256 characters, not ending in a space. */
const TRACESTATE_VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
const MAX_TRACESTATE_MEMBERS = 32;

/**
 * Whether `value` is a valid `tracestate`: at most 32 comma-separated `key=value` members with distinct keys
 * (empty members and spaces around them are allowed). An invalid one is dropped whole, as the recommendation
 * permits; the `traceparent` beside it still counts.
 */
export function isValidTracestate(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const keys = new Set<string>();
  for (const raw of value.split(',')) {
    const member = raw.trim();
    if (member === '') continue;
    const eq = member.indexOf('=');
    if (eq < 0) return false;
    const key = member.slice(0, eq);
    if (!TRACESTATE_KEY.test(key) || !TRACESTATE_VALUE.test(member.slice(eq + 1)) || keys.has(key)) return false;
    keys.add(key);
  }
  return keys.size > 0 && keys.size <= MAX_TRACESTATE_MEMBERS;
}

/** One header's value (the first of several; Node joins repeated `tracestate` headers with commas itself). */
function headerValue(raw: string | string[] | undefined): string | undefined {
  return Array.isArray(raw) ? raw[0] : raw;
}

/**
 * The trace context of an HTTP request: its `traceparent` header when valid, with its `tracestate` when that is
 * valid too; undefined when it carries no valid `traceparent` (most requests: one property read).
 */
export function requestTraceOf(headers: Record<string, string | string[] | undefined>): TraceHeaders | undefined {
  const traceparent = headerValue(headers.traceparent);
  if (traceparent === undefined || !isValidTraceparent(traceparent)) return undefined;
  const tracestate = headerValue(headers.tracestate);
  return isValidTracestate(tracestate) ? { traceparent, tracestate } : { traceparent };
}

/**
 * The trace context an event carries in the CloudEvents distributed-tracing extension (`traceparent`,
 * `tracestate`): its creation context. Undefined when it has no valid `traceparent`.
 */
export function eventTraceOf(frame: EventFrame): TraceHeaders | undefined {
  const traceparent = frame.extensions.traceparent;
  if (traceparent === undefined || !isValidTraceparent(traceparent)) return undefined;
  const tracestate = frame.extensions.tracestate;
  return isValidTracestate(tracestate) ? { traceparent, tracestate } : { traceparent };
}

/**
 * Settles an incoming event's trace context, the one place that decides it: an event's own valid `traceparent`
 * extension wins (it is the event's creation context), keeping its `tracestate` only when that is valid; an event
 * without one (or with a malformed one, which is removed) gets `context`, the publish request's, when there is
 * one. Answers whether the event kept its own.
 */
export function settleEventTrace(frame: EventFrame, context: TraceHeaders | undefined): boolean {
  const extensions = frame.extensions;
  if (extensions.traceparent === undefined && extensions.tracestate === undefined) {
    if (context) setEventTrace(frame, context);
    return false;
  }
  if (isValidTraceparent(extensions.traceparent)) {
    if (extensions.tracestate !== undefined && !isValidTracestate(extensions.tracestate)) delete extensions.tracestate;
    return true;
  }
  delete extensions.traceparent;
  delete extensions.tracestate;
  if (context) setEventTrace(frame, context);
  return false;
}

function setEventTrace(frame: EventFrame, context: TraceHeaders): void {
  frame.extensions.traceparent = context.traceparent;
  if (context.tracestate !== undefined) frame.extensions.tracestate = context.tracestate;
}

import fc from 'fast-check';
import type { EventFrame } from '@libs/frame';
import {
  eventTraceOf,
  formatTraceparent,
  isValidTraceparent,
  isValidTracestate,
  parseTraceparent,
  requestTraceOf,
  settleEventTrace,
} from './trace-context';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const VALID = `00-${TRACE_ID}-${SPAN_ID}-01`;

const frameWith = (extensions: EventFrame['extensions']): EventFrame => ({
  id: 'e1',
  source: '/s',
  type: 't',
  extensions: { ...extensions },
});

describe('traceparent (W3C trace-context)', () => {
  it('reads the fields of a valid version-00 value', () => {
    expect(parseTraceparent(VALID)).toEqual({ version: '00', traceId: TRACE_ID, spanId: SPAN_ID, flags: 1 });
    expect(parseTraceparent(`00-${TRACE_ID}-${SPAN_ID}-00`)?.flags).toBe(0);
  });

  it.each([
    ['upper-case hex', `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-${SPAN_ID}-01`],
    ['an all-zero parent id', `00-${TRACE_ID}-${'0'.repeat(16)}-01`],
    ['version ff', `ff-${TRACE_ID}-${SPAN_ID}-01`],
    ['version 00 with more fields', `${VALID}-extra`],
    ['a short trace id', `00-${TRACE_ID.slice(1)}-${SPAN_ID}-01`],
    ['a missing flags field', `00-${TRACE_ID}-${SPAN_ID}`],
    ['surrounding spaces', ` ${VALID} `],
    ['two values joined (repeated headers)', `${VALID}, ${VALID}`],
    ['the empty string', ''],
    ['garbage', 'not-a-traceparent'],
  ])('ignores %s', (_why, value) => {
    expect(parseTraceparent(value)).toBeUndefined();
    expect(isValidTraceparent(value)).toBe(false);
  });

  it('ignores what is not a string (an extension may be a number or a boolean)', () => {
    expect(parseTraceparent(42)).toBeUndefined();
    expect(parseTraceparent(true)).toBeUndefined();
    expect(parseTraceparent(undefined)).toBeUndefined();
  });

  it('reads a later version by its first four fields, what follows a "-" ignored', () => {
    expect(parseTraceparent(`01-${TRACE_ID}-${SPAN_ID}-03-whatever`)).toEqual({
      version: '01',
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      flags: 3,
    });
    expect(parseTraceparent(`01-${TRACE_ID}-${SPAN_ID}-03whatever`)).toBeUndefined();
  });

  it('writes version 00 that it reads back (any ids and flags)', () => {
    const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));
    fc.assert(
      fc.property(hex(32), hex(16), fc.integer({ min: 0, max: 255 }), (traceId, spanId, flags) => {
        fc.pre(/[1-9a-f]/.test(traceId) && /[1-9a-f]/.test(spanId));
        expect(parseTraceparent(formatTraceparent(traceId, spanId, flags))).toEqual({
          version: '00',
          traceId,
          spanId,
          flags,
        });
      }),
    );
  });
});

describe('tracestate (W3C trace-context)', () => {
  it.each([
    'congo=t61rcWkgMzE',
    'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE',
    ' rojo=1 , congo=2 ,',
    'tenant1@vendor=x',
    'a-b_c*d/e=with spaces inside',
  ])('accepts %j', (value) => expect(isValidTracestate(value)).toBe(true));

  it.each([
    ['no "="', 'congo'],
    ['an upper-case key', 'Congo=1'],
    ['a key starting with a digit (not multi-tenant)', '1congo=1'],
    ['a value with "="', 'congo=a=b'],
    ['an empty value', 'congo='],
    ['a duplicate key', 'congo=1,congo=2'],
    ['33 members', Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',')],
    ['nothing but commas', ',,'],
    ['a non-ASCII value', 'congo=é'],
  ])('refuses %s', (_why, value) => expect(isValidTracestate(value)).toBe(false));

  it('accepts 32 members', () => {
    expect(isValidTracestate(Array.from({ length: 32 }, (_, i) => `k${i}=v`).join(','))).toBe(true);
  });
});

describe("a request's trace context", () => {
  it('is its traceparent header with its tracestate, each only when valid', () => {
    expect(requestTraceOf({ traceparent: VALID, tracestate: 'congo=1' })).toEqual({
      traceparent: VALID,
      tracestate: 'congo=1',
    });
    expect(requestTraceOf({ traceparent: VALID, tracestate: 'Bad' })).toEqual({ traceparent: VALID });
    expect(requestTraceOf({ traceparent: 'garbage', tracestate: 'congo=1' })).toBeUndefined();
    expect(requestTraceOf({})).toBeUndefined();
  });
});

describe("an event's trace context (settleEventTrace)", () => {
  const request = { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`, tracestate: 'req=1' };

  it("gives an event without one the request's", () => {
    const frame = frameWith({ partitionkey: 'k' });
    expect(settleEventTrace(frame, request)).toBe(false);
    expect(frame.extensions).toEqual({ partitionkey: 'k', traceparent: request.traceparent, tracestate: 'req=1' });
  });

  it("keeps an event's own valid one: the extension wins over the request's header", () => {
    const frame = frameWith({ traceparent: VALID, tracestate: 'own=1' });
    expect(settleEventTrace(frame, request)).toBe(true);
    expect(eventTraceOf(frame)).toEqual({ traceparent: VALID, tracestate: 'own=1' });
  });

  it('drops an invalid tracestate beside a valid traceparent', () => {
    const frame = frameWith({ traceparent: VALID, tracestate: 'BAD' });
    expect(settleEventTrace(frame, request)).toBe(true);
    expect(frame.extensions).toEqual({ traceparent: VALID });
  });

  it("replaces a malformed traceparent extension (and its tracestate) by the request's, or removes it", () => {
    const replaced = frameWith({ traceparent: 'garbage', tracestate: 'own=1' });
    expect(settleEventTrace(replaced, request)).toBe(false);
    expect(replaced.extensions).toEqual({ traceparent: request.traceparent, tracestate: 'req=1' });
    const removed = frameWith({ traceparent: 7, tracestate: 'own=1', other: 'x' });
    expect(settleEventTrace(removed, undefined)).toBe(false);
    expect(removed.extensions).toEqual({ other: 'x' });
  });

  it('leaves an event without trace context alone when the request has none', () => {
    const frame = frameWith({ partitionkey: 'k' });
    settleEventTrace(frame, undefined);
    expect(frame.extensions).toEqual({ partitionkey: 'k' });
  });
});

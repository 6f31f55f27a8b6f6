import fc from 'fast-check';
import { growthFrom, GROWTH_LIMIT } from '../../test/support/growth';
import type { EventFrame } from '@libs/frame';
import { CesqlParseError, evaluateCesql, parseCesql } from './cesql';

/**
 * Properties of the CESQL parser and evaluator over generated input (fast-check, fixed seeds so a CI run is
 * reproducible; each property runs in well under a second).
 */

const NAMES = ['id', 'source', 'type', 'subject', 'time', 'count', 'flag', 'priority', 'missing', 'constructor'];

const quoted = (s: string) => `'${s.replace(/'/g, "''")}'`;
const likePattern = fc
  .array(fc.constantFrom('a', 'b', 'é', '\u{1F600}', '%', '_', '\\%', '\\_', '\\\\', "''"), { maxLength: 8 })
  .map((parts) => `'${parts.join('')}'`);

/** Well-formed expressions from the grammar in README.md: values and predicates, nested a few levels. */
const expressions = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.string({ maxLength: 6 }).map(quoted),
    fc.integer({ min: -2147483648, max: 2147483647 }).map(String),
    fc.constantFrom(...NAMES),
    fc.constantFrom('TRUE', 'false'),
    fc.tuple(fc.constantFrom('LENGTH', 'lower', 'UPPER'), tie('value')).map(([f, v]) => `${f}(${v as string})`),
    tie('value').map((v) => `-(${v as string})`),
  ),
  predicate: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc
      .tuple(tie('value'), fc.constantFrom('=', '!=', '<>', '<', '<=', '>', '>='), tie('value'))
      .map(([a, op, b]) => `${a as string} ${op} ${b as string}`),
    fc
      .tuple(tie('value'), fc.boolean(), likePattern)
      .map(([v, not, p]) => `${v as string} ${not ? 'NOT ' : ''}LIKE ${p}`),
    fc
      .tuple(tie('value'), fc.boolean(), fc.array(tie('value'), { minLength: 1, maxLength: 3 }))
      .map(([v, not, set]) => `${v as string} ${not ? 'NOT ' : ''}IN (${(set as string[]).join(', ')})`),
    fc.constantFrom(...NAMES).map((n) => `EXISTS ${n}`),
    fc.constantFrom(...NAMES),
    tie('predicate').map((p) => `NOT (${p as string})`),
    fc
      .tuple(tie('predicate'), fc.constantFrom('AND', 'or', 'XOR'), tie('predicate'))
      .map(([a, op, b]) => `(${a as string}) ${op} (${b as string})`),
  ),
}));

const frames: fc.Arbitrary<EventFrame> = fc.record({
  id: fc.string({ minLength: 1, maxLength: 8 }),
  source: fc.string({ minLength: 1, maxLength: 8 }),
  type: fc.string({ minLength: 1, maxLength: 8 }),
  specversion: fc.constant('1.0' as const),
  subject: fc.option(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('true', '10', '-7', 'ab\u{1F600}')), {
    nil: undefined,
  }),
  extensions: fc.record(
    {
      count: fc.oneof(fc.integer(), fc.double(), fc.constantFrom('12', '+3', 'x')),
      flag: fc.oneof(fc.boolean(), fc.constantFrom('TRUE', 'false', 'yes')),
      priority: fc.string({ maxLength: 8 }),
    },
    { requiredKeys: [] },
  ),
});

/** What a parse may do: return an expression, or refuse with a CesqlParseError pointing into the text. */
function parseOrRefusal(text: string): ReturnType<typeof parseCesql> | undefined {
  try {
    return parseCesql(text);
  } catch (e) {
    if (!(e instanceof CesqlParseError)) throw e;
    expect(e.position).toBeGreaterThanOrEqual(0);
    expect(e.position).toBeLessThanOrEqual(text.length);
    return undefined;
  }
}

const TOKENS = [
  '(',
  ')',
  ',',
  '-',
  '=',
  '<>',
  '<',
  '>=',
  "'a'",
  '"b"',
  "'",
  '12',
  '2147483648',
  'AND',
  'OR',
  'XOR',
  'NOT',
  'LIKE',
  'IN',
  'EXISTS',
  'TRUE',
  'subject',
  'count',
  'LENGTH',
  'CONCAT',
  'Subject',
  '+',
  '*',
  '\\',
  '%',
  ' ',
];

describe('CESQL properties (fast-check, fixed seeds)', () => {
  it('parses any text to an expression or a CesqlParseError, never anything else', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 40 }),
          fc.array(fc.constantFrom(...TOKENS), { maxLength: 30 }).map((t) => t.join(' ')),
        ),
        (text) => {
          parseOrRefusal(text);
        },
      ),
      { seed: 90051, numRuns: 1000 },
    );
  });

  it('parses every generated well-formed predicate, and evaluates it on any event to a boolean without throwing', () => {
    fc.assert(
      fc.property(
        expressions.predicate as fc.Arbitrary<string>,
        fc.array(frames, { minLength: 1, maxLength: 3 }),
        (text, events) => {
          const expression = parseCesql(text);
          for (const event of events) expect(typeof evaluateCesql(expression, event)).toBe('boolean');
        },
      ),
      { seed: 90052, numRuns: 1000 },
    );
  });

  it('never lets an event pass both a predicate and its negation', () => {
    fc.assert(
      fc.property(expressions.predicate as fc.Arbitrary<string>, frames, (text, event) => {
        const both = evaluateCesql(parseCesql(text), event) && evaluateCesql(parseCesql(`NOT (${text})`), event);
        expect(both).toBe(false);
      }),
      { seed: 90055, numRuns: 500 },
    );
  });

  it('keeps nesting bounded: deep input is refused with a CesqlParseError, not a stack overflow', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2000 }), fc.constantFrom('(', 'NOT ', '-', 'LOWER('), (depth, opener) => {
        parseOrRefusal(`${opener.repeat(depth)}subject`);
      }),
      { seed: 90053, numRuns: 200 },
    );
  });

  // Linear, by comparing two sizes on this machine rather than by a clock bound (test/support/growth.ts): the 16 KiB
  // attribute (the default bound) costs about 4 times what a 4 KiB one does; a quadratic evaluation, 16 times.
  it('evaluates in time linear in the attribute: 64 LIKEs over a 16 KiB attribute cost about 4 times what they do over 4 KiB', () => {
    fc.assert(
      fc.property(
        fc.array(likePattern, { minLength: 64, maxLength: 64 }),
        fc.constantFrom('a', 'ab', '\u{1F600}a'),
        (patterns, unit) => {
          const expression = parseCesql(patterns.map((p) => `subject LIKE ${p}`).join(' OR '));
          const event = (chars: number): EventFrame => ({
            id: '1',
            source: 's',
            type: 't',
            subject: unit.repeat(Math.floor(chars / unit.length)),
            extensions: {},
          });
          expect(growthFrom(4096, event, (e) => evaluateCesql(expression, e))).toBeLessThan(GROWTH_LIMIT);
        },
      ),
      { seed: 90054, numRuns: 10 },
    );
  });
});

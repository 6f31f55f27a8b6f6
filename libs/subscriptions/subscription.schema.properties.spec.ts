import fc from 'fast-check';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { compileFilters, Filter } from '@libs/filter';
import type { EventFrame } from '@libs/frame';
import { createSubscriptionSchema } from './subscription.schema';

/**
 * The subscription request schema and the filter compiler it hands `filters` to, over generated input
 * (fast-check, fixed seeds; a fraction of a second each). SubscriptionService.parse runs exactly these two.
 */

/** What the service does with a body: the schema, then the filters. Refusals must be InvalidRequest (a 400). */
function validate(body: unknown): 'accepted' | 'refused' {
  const parsed = createSubscriptionSchema.safeParse(body);
  if (!parsed.success) {
    expect(parsed.error.issues.length).toBeGreaterThan(0);
    return 'refused';
  }
  try {
    compileFilters(parsed.data.filters);
    return 'accepted';
  } catch (e) {
    expect(e).toBeInstanceOf(EventMeshError);
    expect((e as EventMeshError).code).toBe(ErrorCode.InvalidRequest);
    return 'refused';
  }
}

const name = fc.stringMatching(/^[a-z0-9]{1,8}$/);
const values = fc.dictionary(name, fc.string({ minLength: 1, maxLength: 6 }), { minKeys: 1, maxKeys: 3 });
const sql = fc.oneof(
  fc.constantFrom(
    "type = 'a'",
    'EXISTS subject',
    "subject LIKE 'o%r_%'",
    'count > 3 AND NOT flag',
    "lower(type) IN ('a', 'b')",
  ),
  fc.stringMatching(/^[a-z%_]{0,8}$/).map((p) => `subject NOT LIKE '${p}'`),
);

/** Valid filter trees, kept within the depth and count limits by their size. */
const filters = fc.letrec<{ filter: Filter }>((tie) => ({
  filter: fc.oneof(
    { depthSize: 'small', maxDepth: 4 },
    values.map((v): Filter => ({ exact: v })),
    values.map((v): Filter => ({ prefix: v })),
    values.map((v): Filter => ({ suffix: v })),
    sql.map((s): Filter => ({ sql: s })),
    fc.array(tie('filter'), { minLength: 1, maxLength: 3 }).map((f): Filter => ({ all: f })),
    fc.array(tie('filter'), { minLength: 1, maxLength: 3 }).map((f): Filter => ({ any: f })),
    tie('filter').map((f): Filter => ({ not: f })),
  ),
})).filter;

const validBody = fc.oneof(
  fc.record(
    {
      protocol: fc.constant('HTTP'),
      sink: fc.webUrl(),
      topic: fc.constant('events'),
      filters: fc.array(filters, { maxLength: 3 }),
      config: fc.record({ trusted: fc.boolean() }),
    },
    { requiredKeys: ['sink'] },
  ),
  fc.record(
    {
      protocol: fc.constant('STREAM'),
      filters: fc.array(filters, { maxLength: 3 }),
      config: fc.record({ policy: fc.constantFrom('LOAD_BALANCE', 'BROADCAST') }),
    },
    { requiredKeys: ['protocol'] },
  ),
);

const frames: fc.Arbitrary<EventFrame> = fc.record({
  id: fc.string({ minLength: 1 }),
  source: fc.string({ minLength: 1 }),
  type: fc.constantFrom('a', 'b', 'A'),
  specversion: fc.constant('1.0' as const),
  subject: fc.option(fc.string({ maxLength: 6 }), { nil: undefined }),
  extensions: fc.dictionary(name, fc.oneof(fc.string(), fc.integer(), fc.boolean()), { maxKeys: 3 }),
});

describe('subscription schema properties (fast-check, fixed seeds)', () => {
  it('answers any JSON body with acceptance or a validation refusal, never an exception', () => {
    const keys = fc.constantFrom('protocol', 'sink', 'topic', 'filters', 'config', 'startFrom', 'retry', '__proto__');
    const loose = fc.dictionary(keys, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 });
    const filtersOnly = fc.jsonValue({ maxDepth: 4 }).map((f) => ({ protocol: 'STREAM', filters: f }));
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue({ maxDepth: 3 }), loose, filtersOnly), (body) => {
        validate(body);
      }),
      { seed: 90071, numRuns: 1500 },
    );
  });

  it('accepts every well-formed subscription and compiles its filters to the same filters', () => {
    fc.assert(
      fc.property(validBody, (body) => {
        expect(validate(body)).toBe('accepted');
        const parsed = createSubscriptionSchema.parse(body);
        const compiled = compileFilters(parsed.filters);
        expect(compileFilters(JSON.parse(JSON.stringify(compiled.filters))).filters).toEqual(compiled.filters);
        expect(compiled.filters).toEqual(body.filters ?? []);
      }),
      { seed: 90072, numRuns: 500 },
    );
  });

  it('compiles filters whose matching never throws, on any event', () => {
    fc.assert(
      fc.property(
        fc.array(filters, { maxLength: 3 }),
        fc.array(frames, { minLength: 1, maxLength: 3 }),
        (list, events) => {
          const compiled = compileFilters(list);
          for (const event of events) expect(typeof compiled.matches(event)).toBe('boolean');
        },
      ),
      { seed: 90073, numRuns: 500 },
    );
  });
});

import { ErrorCode, EventMeshError } from '@libs/errors';
import type { EventFrame } from '@libs/frame';
import { compileFilters, MAX_FILTER_COUNT, MAX_FILTER_DEPTH } from './filter';

function frame(overrides: Partial<EventFrame> = {}): EventFrame {
  return {
    id: 'e-1',
    source: 'https://shop.example/orders',
    type: 'com.example.order.created',
    subject: 'orders/42.json',
    datacontenttype: 'application/json',
    extensions: { region: 'eu-west', sequence: 10, urgent: true },
    ...overrides,
  };
}

function matches(filters: unknown, event: EventFrame = frame()): boolean {
  return compileFilters(filters).matches(event);
}

function compileError(filters: unknown): EventMeshError {
  try {
    compileFilters(filters);
  } catch (e) {
    if (e instanceof EventMeshError) return e;
    throw e;
  }
  throw new Error('expected the filters to be refused');
}

/** `{ not: { not: ... { exact } } }` with `depth` filter objects in all. */
function notChain(depth: number): unknown {
  let filter: unknown = { exact: { type: 'com.example.order.created' } };
  for (let i = 1; i < depth; i++) filter = { not: filter };
  return filter;
}

describe('compileFilters: matching', () => {
  it('lets every event through an empty or absent filter list', () => {
    expect(matches([])).toBe(true);
    expect(matches(undefined)).toBe(true);
  });

  it('matches exact attribute values, case-sensitively', () => {
    expect(matches([{ exact: { type: 'com.example.order.created' } }])).toBe(true);
    expect(matches([{ exact: { type: 'com.example.order.CREATED' } }])).toBe(false);
    expect(matches([{ exact: { type: 'com.example.order' } }])).toBe(false);
  });

  it('needs every attribute of one dialect object to match', () => {
    expect(matches([{ exact: { type: 'com.example.order.created', region: 'eu-west' } }])).toBe(true);
    expect(matches([{ exact: { type: 'com.example.order.created', region: 'us-east' } }])).toBe(false);
  });

  it('matches prefixes and suffixes', () => {
    expect(matches([{ prefix: { source: 'https://shop.example/' } }])).toBe(true);
    expect(matches([{ prefix: { source: 'http://' } }])).toBe(false);
    expect(matches([{ suffix: { subject: '.json' } }])).toBe(true);
    expect(matches([{ suffix: { subject: '.xml' } }])).toBe(false);
  });

  it('reads optional context attributes and extensions', () => {
    const event = frame({ time: '2024-05-01T10:00:00Z', dataschema: 'urn:orders:v2' });
    expect(matches([{ prefix: { time: '2024-05', datacontenttype: 'application/' } }], event)).toBe(true);
    expect(matches([{ exact: { dataschema: 'urn:orders:v2', specversion: '1.0', id: 'e-1' } }], event)).toBe(true);
  });

  it('compares extension numbers and booleans as their text', () => {
    expect(matches([{ exact: { sequence: '10', urgent: 'true' } }])).toBe(true);
    expect(matches([{ prefix: { sequence: '1' } }])).toBe(true);
    expect(matches([{ exact: { urgent: 'TRUE' } }])).toBe(false);
  });

  it('never matches a missing attribute with exact, prefix or suffix', () => {
    const event = frame({ subject: undefined });
    expect(matches([{ exact: { subject: 'x' } }], event)).toBe(false);
    expect(matches([{ prefix: { missing: 'x' } }])).toBe(false);
    expect(matches([{ suffix: { constructor: 'Object() { [native code] }' } }])).toBe(false);
  });

  it('needs every filter of the list to match', () => {
    expect(matches([{ exact: { region: 'eu-west' } }, { suffix: { subject: '.json' } }])).toBe(true);
    expect(matches([{ exact: { region: 'eu-west' } }, { suffix: { subject: '.xml' } }])).toBe(false);
  });

  it('combines with all, any and not', () => {
    const json = { suffix: { subject: '.json' } };
    const xml = { suffix: { subject: '.xml' } };
    expect(matches([{ all: [json, { exact: { region: 'eu-west' } }] }])).toBe(true);
    expect(matches([{ all: [json, xml] }])).toBe(false);
    expect(matches([{ any: [xml, json] }])).toBe(true);
    expect(matches([{ any: [xml] }])).toBe(false);
    expect(matches([{ not: xml }])).toBe(true);
    expect(matches([{ not: json }])).toBe(false);
  });

  it('evaluates nested dialects', () => {
    const filters = [
      {
        any: [
          { not: { prefix: { type: 'com.example.' } } },
          { all: [{ sql: 'sequence > 5' }, { exact: { region: 'eu-west' } }] },
        ],
      },
    ];
    expect(matches(filters)).toBe(true);
    expect(matches(filters, frame({ extensions: { region: 'eu-west', sequence: 3 } }))).toBe(false);
    expect(matches(filters, frame({ type: 'org.other.thing', extensions: {} }))).toBe(true);
  });

  it('evaluates the sql dialect, and a failing expression does not match instead of throwing', () => {
    expect(matches([{ sql: "region LIKE 'eu-%' AND sequence >= 10" }])).toBe(true);
    expect(matches([{ sql: "region LIKE 'us-%'" }])).toBe(false);
    expect(matches([{ sql: 'missing = 1' }])).toBe(false);
    expect(matches([{ not: { sql: 'missing = 1' } }])).toBe(true);
  });

  it('passes its options to every sql filter, nested ones included', () => {
    const filters = [{ all: [{ sql: "subject LIKE 'orders/%'" }] }];
    expect(compileFilters(filters).matches(frame())).toBe(true);
    expect(
      compileFilters(filters, { maxAttributeChars: 256 }).matches(frame({ subject: `orders/${'x'.repeat(250)}` })),
    ).toBe(false);
    expect(
      compileFilters(filters, { maxAttributeChars: 256 }).matches(frame({ subject: `orders/${'x'.repeat(249)}` })),
    ).toBe(true);
  });

  it('keeps a validated copy of the filters that later edits of the input do not change', () => {
    const raw = [{ exact: { region: 'eu-west' } }, { any: [{ sql: 'urgent' }] }];
    const compiled = compileFilters(raw);
    raw[0] = { exact: { region: 'us-east' } };
    expect(compiled.filters).toEqual([{ exact: { region: 'eu-west' } }, { any: [{ sql: 'urgent' }] }]);
    expect(compiled.matches(frame())).toBe(true);
  });
});

describe('compileFilters: validation', () => {
  it('refuses with an InvalidRequest EventMeshError naming the field and the path', () => {
    const error = compileError([{ exact: { type: 'a' } }, { regex: { type: '.*' } }]);
    expect(error.code).toBe(ErrorCode.InvalidRequest);
    expect(error.details).toEqual({ field: 'filters', path: 'filters[1].regex' });
    expect(error.message).toBe(
      'filters[1].regex: unknown filter dialect "regex"; supported: exact, prefix, suffix, all, any, not, sql',
    );
  });

  // [case, filters, path, message]
  it.each<[string, unknown, string, string]>([
    [
      'filters that are not an array',
      { exact: { type: 'a' } },
      'filters',
      'filters: must be an array of filter objects, found an object',
    ],
    [
      'a null filter',
      [null],
      'filters[0]',
      'filters[0]: must be a filter object such as {"exact": {"type": "..."}}, found null',
    ],
    [
      'a filter with two dialect keys',
      [{ exact: { type: 'a' }, prefix: { type: 'b' } }],
      'filters[0]',
      'filters[0]: a filter object has exactly one dialect key, found 2 (exact, prefix)',
    ],
    [
      'a filter with no dialect key',
      [{}],
      'filters[0]',
      'filters[0]: a filter object has exactly one dialect key, found none',
    ],
    [
      'a number value',
      [{ exact: { sequence: 10 } }],
      'filters[0].exact.sequence',
      'filters[0].exact.sequence: value must be a string, found a number',
    ],
    [
      'a boolean value',
      [{ suffix: { urgent: true } }],
      'filters[0].suffix.urgent',
      'filters[0].suffix.urgent: value must be a string, found a boolean',
    ],
    [
      'an empty value',
      [{ prefix: { type: '' } }],
      'filters[0].prefix.type',
      'filters[0].prefix.type: value must not be empty',
    ],
    [
      'an empty attribute name',
      [{ exact: { '': 'x' } }],
      'filters[0].exact[""]',
      'filters[0].exact[""]: attribute name must not be empty',
    ],
    [
      'an upper-case attribute name',
      [{ suffix: { Type: 'x' } }],
      'filters[0].suffix.Type',
      'filters[0].suffix.Type: attribute name "Type" must be lower-case letters and digits',
    ],
    [
      'an attribute name with a dash',
      [{ exact: { 'my-ext': 'x' } }],
      'filters[0].exact["my-ext"]',
      'filters[0].exact["my-ext"]: attribute name "my-ext" must be lower-case letters and digits',
    ],
    [
      'an empty attribute object',
      [{ exact: {} }],
      'filters[0].exact',
      'filters[0].exact: must name at least one attribute',
    ],
    [
      'an attribute body that is not an object',
      [{ exact: 'type' }],
      'filters[0].exact',
      'filters[0].exact: must be an object of attribute names to strings, found a string',
    ],
    [
      'an all that is not an array',
      [{ all: { exact: { type: 'a' } } }],
      'filters[0].all',
      'filters[0].all: must be an array of filter objects, found an object',
    ],
    ['an empty any', [{ any: [] }], 'filters[0].any', 'filters[0].any: must contain at least one filter'],
    [
      'a not holding an array',
      [{ not: [{ exact: { type: 'a' } }] }],
      'filters[0].not',
      'filters[0].not: must be a filter object such as {"exact": {"type": "..."}}, found an array',
    ],
    [
      'a bad filter deep inside',
      [{ any: [{ all: [{ exact: { type: 'a' } }, { not: { exact: { type: 1 } } }] }] }],
      'filters[0].any[0].all[1].not.exact.type',
      'filters[0].any[0].all[1].not.exact.type: value must be a string, found a number',
    ],
    [
      'a sql that is not a string',
      [{ sql: 5 }],
      'filters[0].sql',
      'filters[0].sql: must be a string holding a CESQL expression, found a number',
    ],
  ])('refuses %s', (_case, filters, path, message) => {
    const error = compileError(filters);
    expect(error.code).toBe(ErrorCode.InvalidRequest);
    expect(error.details).toMatchObject({ field: 'filters', path });
    expect(error.message).toBe(message);
  });

  it('refuses malformed SQL with its path and the position in the expression', () => {
    const error = compileError([{ exact: { type: 'a' } }, { all: [{ sql: "subject = 'a' )" }] }]);
    expect(error.details).toEqual({ field: 'filters', path: 'filters[1].all[0].sql', position: 14 });
    expect(error.message).toBe(
      "filters[1].all[0].sql: invalid CESQL expression: unexpected ')' after a complete expression at position 14",
    );
  });

  it.each([["TRIM(subject) = 'a'"], ["subject = 'open"], [''], ['subject LIKE 5']])(
    'refuses the CESQL expression %j at create time',
    (sql) => {
      expect(compileError([{ sql }]).details).toMatchObject({ path: 'filters[0].sql' });
    },
  );

  it(`accepts ${MAX_FILTER_DEPTH} levels of nesting and refuses the next one`, () => {
    expect(matches([notChain(MAX_FILTER_DEPTH)])).toBe(false);
    const error = compileError([notChain(MAX_FILTER_DEPTH + 1)]);
    expect(error.details).toEqual({ field: 'filters', path: `filters[0]${'.not'.repeat(MAX_FILTER_DEPTH)}` });
    expect(error.message).toContain(`filters nest deeper than ${MAX_FILTER_DEPTH} levels`);
  });

  it(`accepts ${MAX_FILTER_COUNT} filters and refuses more, nested ones included`, () => {
    const one = { exact: { type: 'com.example.order.created' } };
    expect(matches(Array.from({ length: MAX_FILTER_COUNT }, () => one))).toBe(true);
    expect(compileError(Array.from({ length: MAX_FILTER_COUNT + 1 }, () => one)).details).toEqual({
      field: 'filters',
      path: `filters[${MAX_FILTER_COUNT}]`,
    });
    const nested = compileError([{ all: Array.from({ length: MAX_FILTER_COUNT }, () => one) }]);
    expect(nested.details).toMatchObject({ path: `filters[0].all[${MAX_FILTER_COUNT - 1}]` });
    expect(nested.message).toContain(`too many filters: at most ${MAX_FILTER_COUNT}, nested ones included`);
  });
});

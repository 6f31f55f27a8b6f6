import { CloudEvent, ValidationError } from 'cloudevents';
import fc from 'fast-check';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { frameFromStructured } from './cloudevent.adaptor';
import { REQUIRED_ATTRIBUTES } from './cloudevent-attributes';
import { OPTIONAL_ATTRIBUTES } from './event-frame';

/**
 * The structured-mode adaptor applies the `cloudevents` library's rules without building a `CloudEvent`. This holds
 * it to the library: over generated events, valid and not, its verdict (the frame, or the refusal's code, message
 * and details) equals that of the adaptor as it was when it validated through `new CloudEvent(input, true)`
 * (`reference` below, kept verbatim but for the frame it builds, which the new adaptor builds the same way).
 */
function reference(input: Record<string, unknown>): unknown {
  for (const name of REQUIRED_ATTRIBUTES) {
    const value = input[name];
    if (value === undefined || value === null || value === '')
      throw invalid(`missing required attribute "${name}"`, { attribute: name });
    if (typeof value !== 'string') throw invalid(`attribute "${name}" must be a string`, { attribute: name });
  }
  if (input.specversion !== '1.0') {
    throw invalid(`unsupported specversion "${String(input.specversion)}"; this runtime accepts "1.0"`, {
      attribute: 'specversion',
    });
  }
  for (const [name, value] of Object.entries(input)) {
    if (name !== 'data' && typeof value === 'string' && /\p{Surrogate}/u.test(value)) {
      throw invalid(`attribute "${name}" is not valid Unicode: it holds an unpaired surrogate`, { attribute: name });
    }
  }
  if (input.data !== undefined && input.data_base64 !== undefined) {
    throw invalid('an event carries "data" or "data_base64", not both', { attribute: 'data_base64' });
  }
  try {
    new CloudEvent(input as never, true);
  } catch (e) {
    throw fromValidationError(e);
  }
  const known = new Set<string>([...REQUIRED_ATTRIBUTES, ...OPTIONAL_ATTRIBUTES, 'data', 'data_base64']);
  for (const [name, value] of Object.entries(input)) {
    if (known.has(name)) continue;
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw invalid(`extension attribute "${name}" must be a string, number or boolean`, { attribute: name });
    }
    // The adaptor's own rule after the library's (added since): an extension number is a CloudEvents Integer.
    if (typeof value === 'number' && (value < -2147483648 || value > 2147483647)) {
      throw invalid(
        `extension attribute "${name}" is beyond the CloudEvents Integer range (-2147483648 to 2147483647)`,
        { attribute: name },
      );
    }
  }
  for (const name of OPTIONAL_ATTRIBUTES) {
    const value = input[name];
    if (value !== undefined && typeof value !== 'string')
      throw invalid(`attribute "${name}" must be a string`, { attribute: name });
    // The adaptor's own rule (added since): an empty time, which the library replaces by the current time.
    if (name === 'time' && value === '')
      throw invalid('attribute "time" must be a timestamp, not empty', { attribute: name });
  }
  // The adaptor's own rule (added since): a data_base64 the library skips (null, 0, false) is refused.
  if (input.data_base64 !== undefined && typeof input.data_base64 !== 'string')
    throw invalid('attribute "data_base64" must be a string', { attribute: 'data_base64' });
  const type = input.datacontenttype as string | undefined;
  if (
    input.data_base64 === undefined &&
    input.data !== undefined &&
    type !== undefined &&
    !/[/+]json(;|$)/.test(type) &&
    typeof input.data !== 'string'
  ) {
    throw invalid(`"data" must be a string when datacontenttype is "${type}"`, { attribute: 'data' });
  }
  return 'accepted';
}

function fromValidationError(e: unknown): EventMeshError {
  if (e instanceof ValidationError) {
    const first = (e.errors ?? [])[0] as { instancePath?: string; message?: string } | string | undefined;
    if (first && typeof first === 'object') {
      const attribute = (first.instancePath ?? '').replace(/^\//, '') || undefined;
      return invalid(`attribute "${attribute ?? '?'}" ${first.message ?? 'is invalid'}`, { attribute });
    }
    return invalid(e.message.split('\n')[0], {});
  }
  return invalid(e instanceof Error ? e.message : String(e), {});
}

const invalid = (message: string, details: Record<string, unknown>) =>
  new EventMeshError(ErrorCode.InvalidCloudEvent, message, details);

function verdict(run: () => unknown): unknown {
  try {
    run();
    return 'accepted';
  } catch (e) {
    if (!(e instanceof EventMeshError)) throw e;
    return { code: e.code, message: e.message, details: e.details };
  }
}

/** Values that sit on either side of the library's rules. */
const tricky = fc.oneof(
  fc.constantFrom(
    '',
    'x',
    '/s',
    'https://example.com/a?b#c',
    'urn:a:b',
    'not a uri',
    ':::',
    'a\nb',
    'x\u00e9',
    '%zz',
    '1.0',
    '0.3',
  ),
  fc.constantFrom(
    '2026-01-01T00:00:00Z',
    '2026-01-01T00:00:00.123+02:00',
    '2026-13-01T00:00:00Z',
    'yesterday',
    '2026-01-01',
  ),
  fc.constantFrom('AQID', 'AQI', 'A===', '****', '  AQID  ', 'Zm9vYg=='),
  fc.constantFrom('application/json', 'text/plain', 'application/cloudevents+json'),
  fc.string({ maxLength: 6 }),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 2 }),
);
const name = fc.oneof(
  fc.constantFrom(
    ...REQUIRED_ATTRIBUTES,
    ...OPTIONAL_ATTRIBUTES,
    'data',
    'data_base64',
    'schemaurl',
    'datacontentencoding',
    'partitionkey',
    '__proto__',
  ),
  fc.constantFrom('Upper', 'with_underscore', 'with-dash', 'a\nb', 'averyveryverylongextensionname', 'ext1'),
  fc.stringMatching(/^[a-z0-9]{1,8}$/),
);
const event = fc
  .record({
    id: fc.constant('e-1'),
    source: fc.constant('/orders'),
    type: fc.constant('order.created'),
    specversion: fc.constant('1.0'),
  })
  .chain((base) =>
    fc.array(fc.tuple(name, tricky), { maxLength: 5 }).map((pairs) => {
      const out: Record<string, unknown> = { ...base };
      for (const [k, v] of pairs)
        Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
      return out;
    }),
  );

describe('frameFromStructured agrees with the cloudevents library (fast-check, fixed seed)', () => {
  it('accepts what the library accepts and refuses the rest with the same code, message and details', () => {
    let accepted = 0;
    fc.assert(
      fc.property(event, (input) => {
        const expected = verdict(() => reference(JSON.parse(JSON.stringify(input))));
        expect(verdict(() => frameFromStructured(JSON.parse(JSON.stringify(input))))).toEqual(expected);
        if (expected === 'accepted') accepted++;
      }),
      { seed: 90069, numRuns: 3000 },
    );
    // Both sides of the rules were exercised.
    expect(accepted).toBeGreaterThan(300);
    expect(accepted).toBeLessThan(2700);
  });

  it.each([
    ['an empty time (the library puts the current time in its place; the adaptor refuses it)', { time: '' }],
    ['a malformed time', { time: 'yesterday' }],
    ['data_base64 that is not base64', { data_base64: '****' }],
    ['a schemaurl', { schemaurl: 'https://example.com/s' }],
    ['an extension name with an upper-case letter', { Ext: 'x' }],
    ['a fractional extension value', { ext: 1.5 }],
    ['a source that is not a URI reference', { source: 'not a uri' }],
    ['a dataschema that is not a URI', { dataschema: '/relative' }],
    ['an empty subject', { subject: '' }],
  ])('decides %s as the library does', (_what, extra) => {
    const input = { id: 'e-1', source: '/orders', type: 'order.created', specversion: '1.0', ...extra };
    expect(verdict(() => frameFromStructured({ ...input }))).toEqual(verdict(() => reference({ ...input })));
  });
});

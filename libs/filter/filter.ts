import { ErrorCode, EventMeshError } from '@libs/errors';
import type { EventFrame } from '@libs/frame';
import { ATTRIBUTE_NAME, attributeText } from './attributes';
import { CesqlOptions, CesqlParseError, evaluateCesql, parseCesql } from './cesql';

/**
 * Subscription filters in the dialects of the CloudEvents Subscriptions API (section 3.2.4): a subscription
 * carries a list of filter objects, each `{ "<dialect>": <body> }`, and receives an event only when every one
 * of them matches. `compileFilters` validates the JSON when the subscription is created (a bad filter is a 400
 * then) and turns it into a predicate that cannot fail later, at dispatch time.
 */

/** Deepest nesting of filter objects; the top-level filters are at depth 1. */
export const MAX_FILTER_DEPTH = 16;
/** Most filter objects in one subscription, nested ones included; bounds the work per event. */
export const MAX_FILTER_COUNT = 64;

export const FILTER_DIALECTS = ['exact', 'prefix', 'suffix', 'all', 'any', 'not', 'sql'] as const;
export type FilterDialect = (typeof FILTER_DIALECTS)[number];

/** Attribute name -> the string it is compared with. */
export type AttributeValues = Record<string, string>;

export type Filter =
  | { exact: AttributeValues }
  | { prefix: AttributeValues }
  | { suffix: AttributeValues }
  | { all: Filter[] }
  | { any: Filter[] }
  | { not: Filter }
  | { sql: string };

export interface CompiledFilter {
  /** The validated filters, copied from the input. */
  readonly filters: readonly Filter[];
  /** True when the event passes every filter (always, for an empty list). Never throws. */
  matches(frame: EventFrame): boolean;
}

/** How filters are evaluated; the runtime passes its configuration (EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS). */
export type FilterOptions = CesqlOptions;

type Predicate = (frame: EventFrame) => boolean;

interface Compiled {
  filter: Filter;
  predicate: Predicate;
}

/** Shared by the whole walk, so the filter count covers nested filters too. */
interface Walk {
  count: number;
  options: FilterOptions;
}

/**
 * Validates a subscription's `filters` and compiles them. `undefined` is an empty list (the property is
 * optional). Throws EventMeshError(InvalidRequest) with details `{ field: 'filters', path }`, `path` naming the
 * offending element (`filters[1].all[0].sql`); CESQL errors add `position`, the character offset in the expression.
 */
export function compileFilters(raw: unknown, options: FilterOptions = {}): CompiledFilter {
  const list = raw === undefined ? [] : raw;
  if (!Array.isArray(list)) throw invalid('filters', `must be an array of filter objects, found ${jsonType(list)}`);
  const walk: Walk = { count: 0, options };
  const compiled = list.map((item: unknown, i) => compileFilter(item, `filters[${i}]`, 1, walk));
  const predicates = compiled.map((c) => c.predicate);
  return {
    filters: compiled.map((c) => c.filter),
    matches: (frame) => predicates.every((predicate) => predicate(frame)),
  };
}

function compileFilter(raw: unknown, path: string, depth: number, walk: Walk): Compiled {
  if (++walk.count > MAX_FILTER_COUNT) {
    throw invalid(path, `too many filters: at most ${MAX_FILTER_COUNT}, nested ones included`);
  }
  if (depth > MAX_FILTER_DEPTH) throw invalid(path, `filters nest deeper than ${MAX_FILTER_DEPTH} levels`);
  if (!isObject(raw)) {
    throw invalid(path, `must be a filter object such as {"exact": {"type": "..."}}, found ${jsonType(raw)}`);
  }
  const keys = Object.keys(raw);
  if (keys.length !== 1) {
    const found = keys.length === 0 ? 'none' : `${keys.length} (${keys.join(', ')})`;
    throw invalid(path, `a filter object has exactly one dialect key, found ${found}`);
  }
  const dialect = keys[0];
  const body = raw[dialect];
  const bodyPath = member(path, dialect);
  switch (dialect) {
    case 'exact':
    case 'prefix':
    case 'suffix':
      return compileAttributeFilter(dialect, body, bodyPath);
    case 'all':
    case 'any':
      return compileListFilter(dialect, body, bodyPath, depth, walk);
    case 'not':
      return compileNotFilter(body, bodyPath, depth, walk);
    case 'sql':
      return compileSqlFilter(body, bodyPath, walk.options);
    default:
      throw invalid(bodyPath, `unknown filter dialect "${dialect}"; supported: ${FILTER_DIALECTS.join(', ')}`);
  }
}

const STRING_TESTS: Record<'exact' | 'prefix' | 'suffix', (actual: string, expected: string) => boolean> = {
  exact: (actual, expected) => actual === expected,
  prefix: (actual, expected) => actual.startsWith(expected),
  suffix: (actual, expected) => actual.endsWith(expected),
};

/** exact/prefix/suffix: every named attribute must be present and pass the string test (case-sensitive). */
function compileAttributeFilter(dialect: 'exact' | 'prefix' | 'suffix', body: unknown, path: string): Compiled {
  if (!isObject(body)) throw invalid(path, `must be an object of attribute names to strings, found ${jsonType(body)}`);
  const entries = Object.entries(body);
  if (entries.length === 0) throw invalid(path, 'must name at least one attribute');
  const pairs = entries.map(([name, value]): [string, string] => [
    name,
    checkAttributeEntry(name, value, member(path, name)),
  ]);
  const test = STRING_TESTS[dialect];
  const predicate: Predicate = (frame) =>
    pairs.every(([name, expected]) => {
      const actual = attributeText(frame, name);
      return actual !== undefined && test(actual, expected);
    });
  // Built from the checked pairs: attribute names are lower-case alphanumeric, so none of them is `__proto__`.
  const values: AttributeValues = Object.fromEntries(pairs);
  return { filter: attributeFilter(dialect, values), predicate };
}

function attributeFilter(dialect: 'exact' | 'prefix' | 'suffix', values: AttributeValues): Filter {
  if (dialect === 'exact') return { exact: values };
  return dialect === 'prefix' ? { prefix: values } : { suffix: values };
}

/** The Subscriptions API forbids empty names and values; CloudEvents names are lower-case alphanumeric. */
function checkAttributeEntry(name: string, value: unknown, path: string): string {
  if (name === '') throw invalid(path, 'attribute name must not be empty');
  if (!ATTRIBUTE_NAME.test(name)) throw invalid(path, `attribute name "${name}" must be lower-case letters and digits`);
  if (typeof value !== 'string') throw invalid(path, `value must be a string, found ${jsonType(value)}`);
  if (value === '') throw invalid(path, 'value must not be empty');
  return value;
}

function compileListFilter(dialect: 'all' | 'any', body: unknown, path: string, depth: number, walk: Walk): Compiled {
  if (!Array.isArray(body)) throw invalid(path, `must be an array of filter objects, found ${jsonType(body)}`);
  // The spec requires at least one: an empty `any` could never match, an empty `all` always would.
  if (body.length === 0) throw invalid(path, 'must contain at least one filter');
  const children = body.map((item: unknown, i) => compileFilter(item, `${path}[${i}]`, depth + 1, walk));
  const predicates = children.map((c) => c.predicate);
  const filters = children.map((c) => c.filter);
  return dialect === 'all'
    ? { filter: { all: filters }, predicate: (frame) => predicates.every((p) => p(frame)) }
    : { filter: { any: filters }, predicate: (frame) => predicates.some((p) => p(frame)) };
}

function compileNotFilter(body: unknown, path: string, depth: number, walk: Walk): Compiled {
  const inner = compileFilter(body, path, depth + 1, walk);
  return { filter: { not: inner.filter }, predicate: (frame) => !inner.predicate(frame) };
}

function compileSqlFilter(body: unknown, path: string, options: FilterOptions): Compiled {
  if (typeof body !== 'string') {
    throw invalid(path, `must be a string holding a CESQL expression, found ${jsonType(body)}`);
  }
  try {
    const expression = parseCesql(body, options);
    return { filter: { sql: body }, predicate: (frame) => evaluateCesql(expression, frame) };
  } catch (e) {
    if (!(e instanceof CesqlParseError)) throw e;
    throw invalid(path, `invalid CESQL expression: ${e.message}`, { position: e.position }, e);
  }
}

function invalid(path: string, reason: string, extra: Record<string, unknown> = {}, cause?: unknown): EventMeshError {
  const details = { field: 'filters', path, ...extra };
  return new EventMeshError(ErrorCode.InvalidRequest, `${path}: ${reason}`, details, false, { cause });
}

/** `path.key`, or `path["key"]` when the key would not read as a plain JSON path segment. */
function member(path: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  const type = typeof value;
  return type === 'object' ? 'an object' : type === 'undefined' ? 'nothing' : `a ${type}`;
}

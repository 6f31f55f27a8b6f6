export { compileFilters, FILTER_DIALECTS, MAX_FILTER_COUNT, MAX_FILTER_DEPTH } from './filter';
export type { AttributeValues, CompiledFilter, Filter, FilterDialect, FilterOptions } from './filter';
export {
  CESQL_DEFAULT_MAX_ATTRIBUTE_CHARS,
  CESQL_MAX_DEPTH,
  CESQL_MAX_LENGTH,
  CesqlParseError,
  evaluateCesql,
  parseCesql,
} from './cesql';
export type {
  CesqlExpression,
  CesqlFunction,
  CesqlNode,
  CesqlOptions,
  CesqlValue,
  ComparisonOperator,
  LogicalOperator,
} from './cesql';
export type { LikePart } from './like-pattern';
export { compileLikeMatcher, likeMatches } from './like-pattern';
export type { LikeMatcher } from './like-pattern';

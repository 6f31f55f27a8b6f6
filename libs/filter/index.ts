export { compileFilters, FILTER_DIALECTS, MAX_FILTER_COUNT, MAX_FILTER_DEPTH } from './filter';
export type { AttributeValues, CompiledFilter, Filter, FilterDialect } from './filter';
export { CESQL_MAX_DEPTH, CESQL_MAX_LENGTH, CesqlParseError, evaluateCesql, parseCesql } from './cesql';
export type {
  CesqlExpression,
  CesqlFunction,
  CesqlNode,
  CesqlValue,
  ComparisonOperator,
  LikePart,
  LogicalOperator,
} from './cesql';

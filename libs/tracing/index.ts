export * from './trace-context';
export * from './tracing';
export type { TemporalTracing } from './temporal-tracing';
export * from './workflow-bundle';

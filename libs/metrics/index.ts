export * from './runtime-metrics';
export type { MetricSources } from './metric-sources';
export * from './temporal-telemetry';

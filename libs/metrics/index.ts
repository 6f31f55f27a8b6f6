export * from './runtime-metrics';
export type { MetricSources, RequestReplyView } from './metric-sources';
export * from './temporal-telemetry';

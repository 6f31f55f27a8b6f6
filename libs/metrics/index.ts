export * from './runtime-metrics';
export type { MetricSources, RequestReplyView, StoredCountsView } from './metric-sources';
export * from './temporal-telemetry';

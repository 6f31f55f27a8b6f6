export { RuntimeMetrics } from './runtime-metrics';
export type { MetricSources, RequestReplyView } from './metric-sources';
export { temporalTelemetryFor } from './temporal-telemetry';

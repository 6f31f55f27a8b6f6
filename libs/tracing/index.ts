export { eventTraceOf, parseTraceparent, requestTraceOf } from './trace-context';
export type { TraceHeaders } from './trace-context';
export { TRACING_OFF, startTracing } from './tracing';
export type { DeliveryOutcome, Tracing } from './tracing';
export type { TemporalTracing } from './temporal-tracing';
export { TRACED_WORKFLOW_BUNDLE, WORKFLOW_BUNDLE, WORKFLOW_TRACING_INTERCEPTORS } from './workflow-bundle';

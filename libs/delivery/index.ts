export { WebhookSender } from './webhook-sender';
export type { WebhookResult, WebhookTarget } from './webhook-sender';
export { DispatchLoop, isFenced } from './dispatch-loop';
export type { Deliverer, DispatchLoopDeps, DispatchLoopOptions, DispatchProgress } from './dispatch-loop';
export { backoff, messageIdOf, retryPolicyOf, verdictOf } from './failure-policy';
export type { RetryPolicy, Verdict } from './failure-policy';
export { newProgress } from './progress';
export { CircuitBreaker, CircuitBreakers } from './circuit-breaker';
export type {
  BreakerPermit,
  BreakerSnapshot,
  BreakerState,
  BreakerTransition,
  CircuitBreakerOptions,
} from './circuit-breaker';
export { RunningLoops } from './running-loops';
export type { TenantRecordsTopic } from './tenant-records';
export { ORDERINGS, orderingOf } from './ordering';
export type { Ordering } from './ordering';
export {
  BATCH_DEFAULTS,
  BATCH_MAX_BYTES,
  BATCH_MAX_EVENTS,
  BATCH_MAX_LINGER_MS,
  BATCH_MIN_BYTES,
} from './webhook-batch';
export type { OutBatch } from './webhook-batch';

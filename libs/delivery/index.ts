export * from './webhook-sender';
export * from './dispatch-loop';
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
export * from './running-loops';
export * from './tenant-records';
export { ORDERINGS, orderingOf } from './ordering';
export type { Ordering } from './ordering';
export * from './webhook-batch';

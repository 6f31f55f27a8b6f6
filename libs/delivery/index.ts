export * from './webhook-sender';
export * from './dispatch-loop';
export { messageIdOf, retryPolicyOf, verdictOf } from './failure-policy';
export type { RetryPolicy, Verdict } from './failure-policy';

export { EventMeshClient, type RequestOptions } from './client';
export type { PublishResult, ReplyResult, Subscription, SubscriptionOffsets, SubscriptionSpec } from './api-types';
export type { EventMeshClientOptions, PublishOptions, TokenSource } from './options';
export type { PublishCallOptions, PublishManyOptions } from './publisher';
export type { EventInput } from './events';
export type { RetryOptions } from './retry';
export { Subscriptions, type SubscriptionFilter } from './subscriptions';
export type {
  BatchConsumeOptions,
  BatchHandler,
  BatchItem,
  BatchOutcome,
  Consumer,
  ConsumeOptions,
  ConsumerState,
  ConsumerStats,
  Delivery,
  Handler,
  HandlerContext,
  StateChange,
  Transport,
} from './consumer-types';
export {
  EventMeshError,
  AuthError,
  ValidationError,
  NotFoundError,
  ConflictError,
  RequestTimeoutError,
  PayloadTooLargeError,
  UnavailableError,
  ConnectionError,
  RejectError,
} from './errors';
export { type DedupeStore, type DedupeBounds } from './dedupe/dedupe-store';
export { MemoryDedupeStore } from './dedupe/memory-dedupe-store';
export { PostgresDedupeStore, type PostgresDedupeOptions, type Queryable } from './dedupe/postgres-dedupe-store';
export * from './streaming';
export { CloudEvent } from 'cloudevents';
export {
  webhookReceiver,
  verifySignature,
  type WebhookReceiver,
  type WebhookReceiverOptions,
  type WebhookRequest,
  type WebhookAnswer,
} from './webhook';

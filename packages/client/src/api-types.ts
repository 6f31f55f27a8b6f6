import type { paths } from './generated/api';

/**
 * The request and answer types the SDK sends and reads, taken from the types generated from the runtime's API
 * document (generated/api.ts, `npm run sdk:openapi`), never typed a second time by hand.
 */
type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : never;

type PublishAnswer = JsonOf<paths['/events/publish']['post']['responses'][202]>;

/** Where the runtime wrote one event: its Kafka topic, partition and offset. */
export type PublishResult = Exclude<PublishAnswer, { results: unknown }>;
export type BatchPublishAnswer = Extract<PublishAnswer, { results: unknown }>;

/** What a subscription is: a webhook (`HTTP`, with a `sink`) or a `STREAM` its clients pull; with filters and config. */
export type SubscriptionSpec = JsonOf<paths['/subscriptions']['post']['requestBody']>;

/** A subscription as the runtime shows it. `secret` (the webhook signing secret) is in the create's answer only. */
export type Subscription = JsonOf<paths['/subscriptions']['post']['responses'][201]>;

/** A subscription's offsets per partition, with each partition's lag (`GET /subscriptions/{id}/offsets`). */
export type SubscriptionOffsets = JsonOf<paths['/subscriptions/{id}/offsets']['get']['responses'][200]>;

/** What `reply` got: whether a waiting request took it. */
export type ReplyResult = JsonOf<paths['/events/reply']['post']['responses'][202]>;

/** One delivery of a long-poll answer (and of the WebSocket and SSE messages, which carry the same fields). */
export type WireDelivery = JsonOf<paths['/subscriptions/{id}/poll']['get']['responses'][200]>['deliveries'][number];

/** One answer for a stream delivery, as `POST /subscriptions/{id}/acks` takes it. */
export type Answer = Exclude<JsonOf<NonNullable<paths['/subscriptions/{id}/acks']['post']['requestBody']>>, unknown[]>;

/** The runtime's request bounds and the caller tenant's publish burst (`GET /limits`). */
export type RuntimeLimits = JsonOf<paths['/limits']['get']['responses'][200]>;

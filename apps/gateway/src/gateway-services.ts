import type { A2ABroker, PushDeadLetters } from '@libs/a2a';
import type { DeadLetterReplays, DeadLetterService } from '@libs/dead-letters';
import type { AdaptorRegistry } from '@libs/frame';
import type { HealthService } from '@libs/health';
import type { RuntimeMetrics } from '@libs/metrics';
import type { OwnershipAdmin } from '@libs/ownership';
import type { RequestReplyService } from '@libs/request-reply';
import type { AclAdmin, ApiKeyService, PublisherSecretStore, TenantQuotaAdmin } from '@libs/security';
import type { SessionServer } from '@libs/sessions';
import type { PollConsumers, StreamClients, StreamHub } from '@libs/streams';
import type { SkippedRangeStore } from '@libs/storage';
import type {
  SubscriptionDeliveryState,
  SubscriptionOffsets,
  SubscriptionPlacement,
  SubscriptionService,
} from '@libs/subscriptions';
import type { TopicNamespace } from '@libs/topics';
import type { Gates } from './http/gate-route';
import type { RuntimeLimits } from './publish/limits.controller';
import type { MetricsAccess } from './operations/metrics-access';
import type { RouteTable } from './http/route-table';

/**
 * What the gateway serves with: built by the instance composition (gateway-server.ts) and handed to the feature
 * modules (features/), each of which provides what its controllers inject.
 */
export interface GatewayServices {
  subscriptions: SubscriptionService;
  health: HealthService;
  /** The record of events a subscription never got (Kafka retention). */
  skippedRanges: SkippedRangeStore;
  gates: Gates;
  /** The ACL rules' and the tenant quotas' admin API. */
  acl: AclAdmin;
  quotas: TenantQuotaAdmin;
  /** The tenants' own topics (libs/topics). */
  topics: TopicNamespace;
  requestReply: RequestReplyService;
  /** The protocols events are read in (publish/frame-adaptors.ts). */
  adaptors: AdaptorRegistry;
  streams: StreamHub;
  placement: SubscriptionPlacement;
  /** A subscription's offsets (view, seek) and its delivery state (pause, resume), for operators. */
  subscriptionOffsets: SubscriptionOffsets;
  deliveryState: SubscriptionDeliveryState;
  /** The stream clients of a subscription across the cluster (list, disconnect). */
  streamClients: StreamClients;
  /** The long-poll consumers of the stream subscriptions (capped per subscription). */
  polls: PollConsumers;
  /** PARTITION_OWNED_PULL only. */
  ownership?: OwnershipAdmin;
  /** The admin API's API keys (created, listed, revoked per tenant). */
  apiKeys: ApiKeyService;
  /** Publishers' signing secrets (admin API; the SignatureVerifier reads them). */
  publisherSecrets: PublisherSecretStore;
  /** The A2A broker: agents registry and the agents' JSON-RPC endpoints (docs/a2a.md). */
  a2a: A2ABroker;
  /** A2A pushes given up: browse, read, redeliver, remove (docs/a2a.md, "Push dead letters"). */
  pushDeadLetters: PushDeadLetters;
  /**
   * GET /metrics, whether it passes the admin gate, and its scrape secret and labels; absent when metrics are off (the
   * route is not registered).
   */
  metrics?: { metrics: RuntimeMetrics; adminGate: boolean; access: MetricsAccess };
  /** The body and batch bounds of the runtime (GET /limits). */
  limits: RuntimeLimits;
  /** The routes the gateway serves, which the API document is made from (filled as the app registers them). */
  routes: RouteTable;
  /** Subscriptions' dead letters: browse, read, purge; and their replays (Temporal workflows). */
  deadLetters: DeadLetterService;
  replays: DeadLetterReplays;
  /** Streaming sessions of this gateway process (`/admin/sessions`; the WebSocket routes are sessions-routes.ts). */
  sessions: SessionServer;
}

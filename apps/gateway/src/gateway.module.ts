import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { A2ABroker, PushDeadLetters } from '../../../libs/a2a';
import { DeadLetterReplays, DeadLetterService } from '../../../libs/dead-letters';
import { HealthService } from '../../../libs/health';
import { RuntimeMetrics } from '../../../libs/metrics';
import { AclAdmin, TenantQuotaAdmin } from '../../../libs/security';
import type { OwnershipAdmin } from '../../../libs/ownership';
import { RequestReplyService } from '../../../libs/request-reply';
import { ApiKeyService, PublisherSecretStore } from '../../../libs/security';
import { SessionServer } from '../../../libs/sessions';
import { PollConsumers, StreamClients, StreamHub } from '../../../libs/streams';
import { SkippedRangeStore } from '../../../libs/storage';
import {
  SubscriptionDeliveryState,
  SubscriptionOffsets,
  SubscriptionPlacement,
  SubscriptionService,
} from '../../../libs/subscriptions';
import { A2AAgentsController } from './a2a-agents.controller';
import { A2ADiscoveryController } from './a2a-discovery.controller';
import { A2APushDeadLettersController } from './a2a-push-dead-letters.controller';
import { A2ARestController } from './a2a-rest.controller';
import { A2ARpcController } from './a2a-rpc.controller';
import { AclController } from './acl.controller';
import { ApiDocsController } from './api-docs.controller';
import { AdminController, OWNERSHIP_ADMIN } from './admin.controller';
import { DeadLettersController } from './dead-letters.controller';
import { ApiKeysController } from './api-keys.controller';
import { EventsController } from './events.controller';
import { HealthController } from './health.controller';
import { MetricsAccess } from './metrics-access';
import { AdminMetricsController, MetricsController } from './metrics.controller';
import { HttpErrorFilter } from './http-error';
import { LimitsController, RUNTIME_LIMITS, RuntimeLimits } from './limits.controller';
import { GateGuard, Gates } from './gate-route';
import { PublisherSecretsController } from './publisher-secrets.controller';
import { RouteTable } from './route-table';
import { SessionsAdminController } from './sessions-admin.controller';
import { SkippedRangesController } from './skipped-ranges.controller';
import { StreamsController } from './streams.controller';
import { SubscriptionOperationsController } from './subscription-operations.controller';
import { SubscriptionsController } from './subscriptions.controller';
import { TenantQuotaController } from './tenant-quota.controller';
import { TopicsController } from './topics.controller';
import { TopicGrantsController } from './topic-grants.controller';
import { TopicNamespace } from '../../../libs/topics';

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

/** The HTTP front door. Services are built by the instance composition (instance.ts) and handed in. */
@Module({})
export class GatewayModule {
  static register(services: GatewayServices): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [
        EventsController,
        SubscriptionsController,
        SubscriptionOperationsController,
        DeadLettersController,
        SkippedRangesController,
        StreamsController,
        HealthController,
        ...(services.metrics ? [services.metrics.adminGate ? AdminMetricsController : MetricsController] : []),
        AdminController,
        ApiKeysController,
        PublisherSecretsController,
        AclController,
        TenantQuotaController,
        TopicsController,
        TopicGrantsController,
        A2AAgentsController,
        A2ADiscoveryController,
        A2APushDeadLettersController,
        A2ARpcController,
        A2ARestController,
        ApiDocsController,
        LimitsController,
        SessionsAdminController,
      ],
      providers: [
        { provide: SubscriptionService, useValue: services.subscriptions },
        { provide: DeadLetterService, useValue: services.deadLetters },
        { provide: DeadLetterReplays, useValue: services.replays },
        { provide: HealthService, useValue: services.health },
        { provide: SkippedRangeStore, useValue: services.skippedRanges },
        { provide: Gates, useValue: services.gates },
        { provide: AclAdmin, useValue: services.acl },
        { provide: TenantQuotaAdmin, useValue: services.quotas },
        { provide: TopicNamespace, useValue: services.topics },
        { provide: RequestReplyService, useValue: services.requestReply },
        { provide: StreamHub, useValue: services.streams },
        { provide: PollConsumers, useValue: services.polls },
        { provide: OWNERSHIP_ADMIN, useValue: services.ownership },
        { provide: SubscriptionPlacement, useValue: services.placement },
        { provide: SubscriptionOffsets, useValue: services.subscriptionOffsets },
        { provide: SubscriptionDeliveryState, useValue: services.deliveryState },
        { provide: StreamClients, useValue: services.streamClients },
        { provide: ApiKeyService, useValue: services.apiKeys },
        { provide: PublisherSecretStore, useValue: services.publisherSecrets },
        { provide: A2ABroker, useValue: services.a2a },
        { provide: PushDeadLetters, useValue: services.pushDeadLetters },
        ...(services.metrics
          ? [
              { provide: RuntimeMetrics, useValue: services.metrics.metrics },
              { provide: MetricsAccess, useValue: services.metrics.access },
            ]
          : []),
        { provide: RouteTable, useValue: services.routes },
        { provide: SessionServer, useValue: services.sessions },
        { provide: RUNTIME_LIMITS, useValue: services.limits },
        { provide: APP_GUARD, useClass: GateGuard },
        { provide: APP_FILTER, useClass: HttpErrorFilter },
      ],
    };
  }
}

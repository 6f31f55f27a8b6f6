import { DynamicModule, Module } from '@nestjs/common';
import { HealthService } from '@libs/health';
import { RuntimeMetrics } from '@libs/metrics';
import { SubscriptionPlacement } from '@libs/subscriptions';
import type { GatewayServices } from '../gateway-services';
import { AdminController, OWNERSHIP_ADMIN } from './admin.controller';
import { ApiDocsController } from './api-docs.controller';
import { HealthController } from './health.controller';
import { MetricsAccess } from './metrics-access';
import { AdminMetricsController, MetricsController } from './metrics.controller';
import { provide } from '../http/provide';

/**
 * What operators and their tools read: health, metrics (one of its two controllers, as
 * EVENTMESH_METRICS_ADMIN_GATE says, none when metrics are off), partitions and placement (`/admin`), the API
 * document.
 */
@Module({})
export class OperationsModule {
  static register(s: GatewayServices): DynamicModule {
    return {
      module: OperationsModule,
      controllers: [
        HealthController,
        ...(s.metrics ? [s.metrics.adminGate ? AdminMetricsController : MetricsController] : []),
        AdminController,
        ApiDocsController,
      ],
      providers: [
        provide(HealthService, s.health),
        provide(OWNERSHIP_ADMIN, s.ownership),
        provide(SubscriptionPlacement, s.placement),
        ...(s.metrics ? [provide(RuntimeMetrics, s.metrics.metrics), provide(MetricsAccess, s.metrics.access)] : []),
      ],
    };
  }
}

import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { A2AModule } from './a2a/a2a.module';
import { GatewayCoreModule } from './http/core.module';
import { OperationsModule } from './operations/operations.module';
import { PublishModule } from './publish/publish.module';
import { RequestReplyModule } from './request-reply/request-reply.module';
import { SecurityAdminModule } from './security-admin/security-admin.module';
import { StreamsModule } from './streams/streams.module';
import { SubscriptionsModule } from './subscriptions/subscriptions.module';
import { GateGuard } from './http/gate-route';
import type { GatewayServices } from './gateway-services';
import { HttpErrorFilter } from './http/http-error';

export type { GatewayServices } from './gateway-services';

/** The gateway's features, one Nest module each (features/): each provides what its controllers inject. */
const FEATURES = [
  PublishModule,
  RequestReplyModule,
  SubscriptionsModule,
  StreamsModule,
  OperationsModule,
  SecurityAdminModule,
  A2AModule,
];

/**
 * The HTTP front door: the features' modules over the shared core (the gates, the route table), the gate as the
 * global guard and the error filter. Services are built by the instance composition (gateway-server.ts).
 */
@Module({})
export class GatewayModule {
  static register(services: GatewayServices): DynamicModule {
    return {
      module: GatewayModule,
      imports: [GatewayCoreModule.register(services), ...FEATURES.map((feature) => feature.register(services))],
      providers: [
        { provide: APP_GUARD, useClass: GateGuard },
        { provide: APP_FILTER, useClass: HttpErrorFilter },
      ],
    };
  }

  /** Every controller of a registered gateway, its features' (the route table and the route specs read their decorators). */
  static controllersOf(gateway: DynamicModule): unknown[] {
    return (gateway.imports ?? []).flatMap((feature) => (feature as DynamicModule).controllers ?? []);
  }
}

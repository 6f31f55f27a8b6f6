import { DynamicModule, Global, Module } from '@nestjs/common';
import type { GatewayServices } from '../gateway-services';
import { Gates } from './gate-route';
import { RouteTable } from './route-table';
import { provide } from './provide';

/**
 * What every feature's routes share: the two security gates (the global guard decides each request by its route's
 * gate; some controllers ask the gates about a topic or a tenant) and the table of the routes served (the API
 * document is made from it).
 */
@Global()
@Module({})
export class GatewayCoreModule {
  static register(s: GatewayServices): DynamicModule {
    return {
      module: GatewayCoreModule,
      providers: [provide(Gates, s.gates), provide(RouteTable, s.routes)],
      exports: [Gates, RouteTable],
    };
  }
}

import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { EventMeshClient } from '@eventmesh/client';
import {
  ConfigurableModuleClass,
  EVENT_MESH_OPTIONS,
  EventMeshModuleOptions,
  checkOptions,
} from './event-mesh.module-definition';
import { MESH_CLIENT_PORT } from './mesh-client-port';
import { MeshDrainModule } from './mesh-drain';
import { MeshHandlerExplorer } from './mesh-handler.explorer';
import { sdkPort } from './sdk-port';

/**
 * The event mesh in a Nest app: provides the SDK's `EventMeshClient` for injection and, at bootstrap, consumes
 * the stream subscription of every `@OnMeshEvent` and `@MeshResponder` method; at shutdown drains, then closes.
 */
@Module({
  imports: [DiscoveryModule, MeshDrainModule],
  providers: [
    {
      provide: EventMeshClient,
      useFactory: (options: EventMeshModuleOptions) => new EventMeshClient(checkOptions(options)),
      inject: [EVENT_MESH_OPTIONS],
    },
    { provide: MESH_CLIENT_PORT, useFactory: sdkPort, inject: [EventMeshClient] },
    MeshHandlerExplorer,
  ],
  exports: [EventMeshClient, MeshHandlerExplorer],
})
export class EventMeshModule extends ConfigurableModuleClass {}

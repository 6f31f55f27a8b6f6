import { DynamicModule, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { EventMeshClient } from '@eventmesh/client';
import { MESH_CLIENT_PORT } from '../mesh-client-port';
import { MeshDrainModule } from '../mesh-drain';
import { MeshHandlerExplorer } from '../mesh-handler.explorer';
import { InMemoryEventMeshClient, InMemoryEventMeshClientOptions } from './in-memory-event-mesh-client';

/**
 * `EventMeshModule` for an app's unit tests: the same discovery and Nest context around the decorated methods,
 * with an `InMemoryEventMeshClient` injected wherever `EventMeshClient` is (and as itself, to assert on).
 */
@Module({})
export class EventMeshTestingModule {
  static forRoot(options: InMemoryEventMeshClientOptions = {}): DynamicModule {
    return {
      module: EventMeshTestingModule,
      global: true,
      imports: [DiscoveryModule, MeshDrainModule],
      providers: [
        { provide: InMemoryEventMeshClient, useValue: new InMemoryEventMeshClient(options) },
        { provide: EventMeshClient, useExisting: InMemoryEventMeshClient },
        { provide: MESH_CLIENT_PORT, useExisting: InMemoryEventMeshClient },
        MeshHandlerExplorer,
      ],
      exports: [EventMeshClient, InMemoryEventMeshClient, MeshHandlerExplorer],
    };
  }
}

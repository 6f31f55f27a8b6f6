import { Injectable, Module, OnModuleDestroy } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';

/** What `MeshDrain` drains at shutdown: the handler explorer of each EventMeshModule instance. */
export interface DrainableExplorer {
  onModuleDestroy(): Promise<void>;
}

/**
 * Drains the consumers of every EventMeshModule instance before any other module's `onModuleDestroy` runs, so the
 * handlers in flight finish while the providers they use (a database pool closed in its own `onModuleDestroy`) are
 * still open. Nest calls `onModuleDestroy` module by module in ascending `distance`: the root module (0) first, the
 * modules it imports after it (1, 2, ...), global modules (`Number.MAX_VALUE`) last. This provider sets the distance
 * of its own module below the root's, which puts its hook first. Nest sorts the modules by distance once, when the
 * app initializes, after every provider was constructed.
 */
@Injectable()
export class MeshDrain implements OnModuleDestroy {
  private readonly explorers = new Set<DrainableExplorer>();

  constructor(modules: ModulesContainer) {
    for (const module of modules.values()) if (module.providers.has(MeshDrain)) module.distance = -1;
  }

  add(explorer: DrainableExplorer): void {
    this.explorers.add(explorer);
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all([...this.explorers].map((explorer) => explorer.onModuleDestroy()));
  }
}

/** Imported by `EventMeshModule` and `EventMeshTestingModule`: one `MeshDrain` per app, whatever their number. */
@Module({ providers: [MeshDrain], exports: [MeshDrain] })
export class MeshDrainModule {}

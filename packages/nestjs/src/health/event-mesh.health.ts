import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { MeshHandlerExplorer } from '../mesh-handler.explorer';

/**
 * A `@nestjs/terminus` health indicator (imported from `@eventmesh/nestjs/health`, so apps without terminus never
 * load it): up while every consumer of a decorated handler is connected to the runtime, down while one is
 * connecting or reconnecting; each consumer's subscription, state and transport are in the details. An app
 * with no decorated handler holds no connection and is reported up.
 *
 * ```ts
 * @Module({ imports: [TerminusModule], controllers: [HealthController], providers: [EventMeshHealthIndicator] })
 * ```
 */
@Injectable()
export class EventMeshHealthIndicator {
  constructor(
    private readonly health: HealthIndicatorService,
    private readonly handlers: MeshHandlerExplorer,
  ) {}

  isHealthy(key = 'eventmesh') {
    const indicator = this.health.check(key);
    const consumers = this.handlers.consumerStates();
    return consumers.every((c) => c.state === 'connected')
      ? indicator.up({ consumers })
      : indicator.down({ consumers });
  }
}

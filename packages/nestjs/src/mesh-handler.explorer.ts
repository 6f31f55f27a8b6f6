import {
  BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { ExternalContextCreator } from '@nestjs/core/helpers/external-context-creator';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { MESH_CLIENT_PORT, MeshClientPort, MeshConsumer, MeshEventHandler } from './mesh-client-port';
import { MESH_HANDLER_METADATA, MeshFilter, MeshHandlerMetadata } from './mesh-handler.decorators';
import { MESH_ARGS_METADATA, meshParamsFactory } from './mesh-param.decorators';
import { responderHandler } from './mesh-responder';

/** `context.getType()` inside a guard or interceptor that runs around a mesh handler. */
export const MESH_CONTEXT_TYPE = 'eventmesh';

/** A running consumer of a decorated method, by the name of its subscription. */
interface RunningConsumer {
  name: string;
  subscriptionId: string;
  consumer: MeshConsumer;
}

/** A decorated method found at bootstrap. */
interface DiscoveredHandler {
  instance: object;
  methodName: string;
  meta: MeshHandlerMetadata;
}

/**
 * Finds the `@OnMeshEvent` and `@MeshResponder` methods of every provider at bootstrap, makes sure
 * each one's stream subscription exists and consumes it; at shutdown drains every consumer (the handlers in flight
 * finish and are answered), then closes the client. The method runs inside Nest's context (guards, interceptors,
 * pipes, exception filters), as `@golevelup/nestjs-rabbitmq` runs its `@RabbitSubscribe` methods.
 */
@Injectable()
export class MeshHandlerExplorer implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('EventMesh');
  private readonly consumers: RunningConsumer[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly contextCreator: ExternalContextCreator,
    @Inject(MESH_CLIENT_PORT) private readonly client: MeshClientPort,
  ) {}

  /**
   * A handler whose subscription cannot be had fails the bootstrap, and Nest then runs no shutdown hook: the
   * consumers started before it are drained and the client closed here, so the failed app holds no connection.
   */
  async onApplicationBootstrap(): Promise<void> {
    try {
      for (const handler of this.discover()) await this.start(handler);
    } catch (e) {
      await this.beforeApplicationShutdown();
      await this.onApplicationShutdown();
      throw e;
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    await Promise.all(this.consumers.map(({ consumer }) => consumer.drain()));
    this.logger.log(`drained ${this.consumers.length} consumers`);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.client.close();
  }

  /** Each consumer's subscription and connection state (for the health indicator). */
  consumerStates(): { subscription: string; subscriptionId: string; state: string }[] {
    return this.consumers.map(({ name, subscriptionId, consumer }) => ({
      subscription: name,
      subscriptionId,
      state: consumer.state,
    }));
  }

  /**
   * Decorated methods of static (singleton) providers, each instance once. Not controllers: Nest's
   * ExternalContextCreator finds a method's module (and with it the guard, interceptor and pipe classes it names)
   * among providers only, so on a controller those would silently not run.
   */
  private discover(): DiscoveredHandler[] {
    const wrappers: InstanceWrapper[] = this.discovery.getProviders();
    const seen = new Set<object>();
    const found: DiscoveredHandler[] = [];
    for (const wrapper of wrappers) {
      const instance = wrapper.instance as object | undefined;
      if (!instance || typeof instance !== 'object' || !wrapper.isDependencyTreeStatic() || seen.has(instance))
        continue;
      seen.add(instance);
      for (const methodName of this.scanner.getAllMethodNames(Object.getPrototypeOf(instance))) {
        const method = (instance as Record<string, unknown>)[methodName] as () => unknown;
        const meta = this.reflector.get<MeshHandlerMetadata | undefined>(MESH_HANDLER_METADATA, method);
        if (meta) found.push({ instance, methodName, meta });
      }
    }
    return found;
  }

  private async start({ instance, methodName, meta }: DiscoveredHandler): Promise<void> {
    const label = `${instance.constructor.name}.${methodName}`;
    const name = meta.name ?? label;
    const subscriptionId = await this.client.ensureStreamSubscription({
      name,
      topic: meta.topic,
      filters: filtersOf(meta.filter),
      policy: meta.kind === 'event' ? meta.policy : undefined,
    });
    const call = this.contextCreator.create(
      instance,
      (instance as Record<string, (...args: unknown[]) => unknown>)[methodName],
      methodName,
      MESH_ARGS_METADATA,
      meshParamsFactory,
      undefined,
      undefined,
      undefined,
      MESH_CONTEXT_TYPE,
    );
    const handler: MeshEventHandler =
      meta.kind === 'responder'
        ? responderHandler(
            call,
            this.client,
            { replyType: meta.replyType, replySource: meta.replySource ?? `/nestjs/${label}` },
            this.logger,
          )
        : async (event, delivery) => {
            await call(event, delivery);
          };
    const consumer = this.client.consume(subscriptionId, handler, {
      window: meta.window,
      concurrency: meta.concurrency,
    });
    this.consumers.push({ name, subscriptionId, consumer });
    this.logger.log(`${label} consumes subscription ${name} (${subscriptionId}) of topic ${meta.topic}`);
  }
}

function filtersOf(filter: MeshFilter | MeshFilter[] | undefined): MeshFilter[] {
  if (filter === undefined) return [];
  return Array.isArray(filter) ? filter : [filter];
}

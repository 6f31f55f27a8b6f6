import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleDestroy,
} from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModulesContainer, Reflector } from '@nestjs/core';
import { ExternalContextCreator } from '@nestjs/core/helpers/external-context-creator';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { Module } from '@nestjs/core/injector/module';
import { MESH_CLIENT_PORT, MeshClientPort, MeshConsumer, MeshEventHandler } from './mesh-client-port';
import { MeshDrain } from './mesh-drain';
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

/** A decorated method of a singleton provider, and the EventMeshModule instance that runs it. */
interface DiscoveredHandler {
  instance: object;
  methodName: string;
  meta: MeshHandlerMetadata;
  /** `<Class>.<method>`. */
  label: string;
  /** The subscription's name: `meta.name`, or `label`. */
  name: string;
  /** The module of the provider. */
  host: Module;
  /** The module of the EventMeshModule (or EventMeshTestingModule) instance that runs it. */
  server: Module;
}

const POLICIES = ['LOAD_BALANCE', 'BROADCAST', 'MULTICAST'];

/**
 * Finds the `@OnMeshEvent` and `@MeshResponder` methods of the app's singleton providers at bootstrap, makes sure
 * each one's stream subscription exists and consumes it. At shutdown, before any other module's `onModuleDestroy`
 * (see `MeshDrain`), drains every consumer: the handlers in flight finish and are answered; `onApplicationShutdown`
 * then closes the client. The method runs inside Nest's context (guards, interceptors,
 * pipes, exception filters), as `@golevelup/nestjs-rabbitmq` runs its `@RabbitSubscribe` methods.
 *
 * Each EventMeshModule instance has its own explorer, which runs the handlers of the modules that import that
 * instance; a handler whose module imports none is run by the global instance, or by the only one the app has.
 */
@Injectable()
export class MeshHandlerExplorer implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = new Logger('EventMesh');
  private readonly consumers: RunningConsumer[] = [];
  private drained?: Promise<void>;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly contextCreator: ExternalContextCreator,
    private readonly modules: ModulesContainer,
    @Inject(MESH_CLIENT_PORT) private readonly client: MeshClientPort,
    drain: MeshDrain,
  ) {
    drain.add(this);
  }

  /**
   * Every decorated method of the app is checked before any subscription is ensured: one the module cannot run
   * (on a controller, a request-scoped or transient provider, with an invalid option, sharing its subscription name
   * with another, in a module no EventMeshModule instance serves) fails the bootstrap with all such problems named.
   * A handler whose subscription cannot be had fails the bootstrap too, and Nest then runs no shutdown hook: the
   * consumers started before it are drained and the client closed here, so the failed app holds no connection.
   */
  async onApplicationBootstrap(): Promise<void> {
    try {
      for (const handler of this.discover()) await this.start(handler);
    } catch (e) {
      await this.onModuleDestroy();
      await this.onApplicationShutdown();
      throw e;
    }
  }

  /**
   * Stops taking deliveries, lets the handlers in flight finish and be answered. `MeshDrain` calls it before any
   * other module's `onModuleDestroy`; Nest's own call to it, later, finds it done.
   */
  onModuleDestroy(): Promise<void> {
    this.drained ??= (async () => {
      await Promise.all(this.consumers.map(({ consumer }) => consumer.drain()));
      this.logger.log(`drained ${this.consumers.length} consumers`);
    })();
    return this.drained;
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
   * The decorated methods this explorer runs. Every explorer checks all the app's decorated methods (the same
   * checks, so the first explorer to bootstrap fails before any consumer of any instance started), then keeps those
   * its own module serves.
   *
   * Only singleton providers: a request-scoped provider has no instance outside a request, a transient one an
   * instance per provider that injects it (Nest's static one is a placeholder whose fields were never set), and
   * Nest's ExternalContextCreator finds a method's module (and with it the guard, interceptor and pipe classes it
   * names) among providers only, so on a controller those would silently not run.
   */
  private discover(): DiscoveredHandler[] {
    const problems: string[] = [];
    const handlers: DiscoveredHandler[] = [];
    const seen = new Set<object>();
    const meshModules = [...this.modules.values()].filter(isMeshModule);
    const wrappers = [
      ...this.discovery.getProviders().map((wrapper) => ({ wrapper, controller: false })),
      ...this.discovery.getControllers().map((wrapper) => ({ wrapper, controller: true })),
    ];
    for (const { wrapper, controller } of wrappers) {
      if (wrapper.isAlias) continue;
      const instance = wrapper.instance as unknown;
      const prototype = prototypeOf(wrapper, instance);
      if (!prototype) continue;
      const methods = this.decoratedMethods(prototype);
      if (methods.length === 0) continue;
      if (typeof instance === 'object' && instance !== null) {
        if (seen.has(instance)) continue;
        seen.add(instance);
      }
      const className = (prototype.constructor as { name?: string } | undefined)?.name ?? String(wrapper.name);
      const refusal = controller
        ? 'is on a controller, and the module runs the methods of providers only'
        : wrapper.isTransient
          ? 'is on a transient provider (Scope.TRANSIENT), which has an instance per provider that injects it'
          : !wrapper.isDependencyTreeStatic()
            ? 'is on a request-scoped provider (Scope.REQUEST, or it injects one), which has no instance outside a request'
            : undefined;
      for (const { methodName, meta } of methods) {
        const label = `${className}.${methodName}`;
        const decorator = meta.kind === 'event' ? '@OnMeshEvent' : '@MeshResponder';
        if (refusal) {
          problems.push(`${decorator} ${label} ${refusal}: move it to a singleton provider`);
          continue;
        }
        const invalid = invalidOptions(meta);
        if (invalid.length > 0) {
          problems.push(`${decorator} ${label}: ${invalid.join('; ')}`);
          continue;
        }
        const host = wrapper.host;
        if (!host) {
          problems.push(`${decorator} ${label}: its provider belongs to no module`);
          continue;
        }
        const server = servingModule(host, meshModules);
        if (typeof server === 'string') {
          problems.push(`${decorator} ${label} (${host.name}): ${server}`);
          continue;
        }
        handlers.push({
          instance: instance as object,
          methodName,
          meta,
          label,
          name: meta.name ?? label,
          host,
          server,
        });
      }
    }
    problems.push(...sharedNames(handlers));
    if (problems.length > 0) throw new Error(problems.join('\n'));
    const own = this.discovery.getProviders().find((wrapper) => wrapper.instance === this)?.host;
    return handlers.filter((handler) => handler.server === own);
  }

  private decoratedMethods(prototype: object): { methodName: string; meta: MeshHandlerMetadata }[] {
    const found: { methodName: string; meta: MeshHandlerMetadata }[] = [];
    for (const methodName of this.scanner.getAllMethodNames(prototype)) {
      const method = (prototype as Record<string, unknown>)[methodName];
      if (typeof method !== 'function') continue;
      const meta = this.reflector.get<MeshHandlerMetadata | undefined>(MESH_HANDLER_METADATA, method);
      if (meta) found.push({ methodName, meta });
    }
    return found;
  }

  private async start({ instance, methodName, meta, label, name }: DiscoveredHandler): Promise<void> {
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

/** The prototype whose methods a wrapper's instances have: of its instance, or of its class when it has none yet. */
function prototypeOf(wrapper: InstanceWrapper, instance: unknown): object | undefined {
  if (typeof instance === 'object' && instance !== null) return Object.getPrototypeOf(instance) as object;
  if (!wrapper.isFactory && typeof wrapper.metatype === 'function')
    return (wrapper.metatype as { prototype?: object }).prototype;
  return undefined;
}

/** A module of an EventMeshModule or EventMeshTestingModule instance (it provides an explorer). */
function isMeshModule(module: Module): boolean {
  return module.providers.has(MeshHandlerExplorer);
}

/**
 * The EventMeshModule instance that runs the handlers of `host`: the one `host` imports (not global), else the
 * global one, else the app's only one; or why there is none. A global module is among the imports of every module
 * (Nest adds it there), so the imports say nothing of which global instance a module named.
 */
function servingModule(host: Module, meshModules: Module[]): Module | string {
  const imported = [...host.imports].filter((m) => m && isMeshModule(m));
  const direct = imported.filter((m) => !m.isGlobal);
  if (direct.length === 1) return direct[0];
  if (direct.length > 1)
    return `its module imports ${direct.length} EventMeshModule instances: import one of them in ${host.name}`;
  const global = imported.filter((m) => m.isGlobal);
  if (global.length === 1) return global[0];
  if (meshModules.length === 1) return meshModules[0];
  if (global.length > 1)
    return (
      `the app has ${global.length} global EventMeshModule instances (${global.map((m) => m.name).join(', ')}) ` +
      `and ${host.name} imports none with isGlobal: false: keep one global instance, or import one with ` +
      `isGlobal: false in ${host.name}`
    );
  return (
    `its module imports no EventMeshModule instance and the app has ${meshModules.length}, none of them global: ` +
    `import EventMeshModule.forRoot (or forRootAsync) in ${host.name}`
  );
}

/** What is wrong with a decorated method's options (none: empty). */
function invalidOptions(meta: MeshHandlerMetadata): string[] {
  const invalid: string[] = [];
  if (meta.concurrency !== undefined && !(Number.isInteger(meta.concurrency) && meta.concurrency >= 1))
    invalid.push(`concurrency must be an integer >= 1, got ${shown(meta.concurrency)}`);
  if (meta.window !== undefined && !(Number.isInteger(meta.window) && meta.window >= 1 && meta.window <= 1000))
    invalid.push(`window must be an integer from 1 to 1000, got ${shown(meta.window)}`);
  if (meta.kind === 'event' && meta.policy !== undefined && !POLICIES.includes(meta.policy))
    invalid.push(`policy must be LOAD_BALANCE, BROADCAST or MULTICAST, got ${shown(meta.policy)}`);
  return invalid;
}

/** Handlers of one EventMeshModule instance that would consume one subscription, each set named. */
function sharedNames(handlers: DiscoveredHandler[]): string[] {
  const byName = new Map<string, DiscoveredHandler[]>();
  for (const handler of handlers) {
    const key = JSON.stringify([handler.server.id, handler.name]);
    byName.set(key, [...(byName.get(key) ?? []), handler]);
  }
  return [...byName.values()]
    .filter((group) => group.length > 1)
    .map((group) => {
      const names = group.map(
        (h) => `${h.meta.kind === 'event' ? '@OnMeshEvent' : '@MeshResponder'} ${h.label} (${h.host.name})`,
      );
      return (
        `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]} both consume the subscription ` +
        `"${group[0].name}": give each its own name (the decorator's name: option)`
      );
    });
}

function shown(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

function filtersOf(filter: MeshFilter | MeshFilter[] | undefined): MeshFilter[] {
  if (filter === undefined) return [];
  return Array.isArray(filter) ? filter : [filter];
}

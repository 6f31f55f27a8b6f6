import { RequestMethod } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { Reflector } from '@nestjs/core';
import type { GateRouteSpec } from './gate-route';
import { GatewayModule } from '../gateway.module';
import { AdminMetricsController, MetricsController } from '../operations/metrics.controller';

type ControllerClass = new (...args: never[]) => object;

/** One handler of a Nest controller, read from its decorators' metadata. */
export interface NestRoute {
  controller: ControllerClass;
  /** `GET /subscriptions/:id` */
  route: string;
  /** `SubscriptionsController.get` */
  where: string;
  handler: () => void;
  /** How the gate treats it (`@GateRoute` on the handler, else on its controller). */
  gate: GateRouteSpec | undefined;
}

/**
 * Every route of the gateway's controllers, for the specs that check what each route declares (its gate, its
 * entry of the API document): the module's controllers and both /metrics controllers (the module registers one,
 * as EVENTMESH_METRICS_ADMIN_GATE says).
 */
export function gatewayNestRoutes(): NestRoute[] {
  return nestRoutesOf([
    ...GatewayModule.controllersOf(GatewayModule.register({} as never)),
    MetricsController,
    AdminMetricsController,
  ]);
}

/** The handlers of these controllers (a module's), read from their decorators' metadata. */
export function nestRoutesOf(classes: unknown[]): NestRoute[] {
  const reflector = new Reflector();
  const controllers = classes as ControllerClass[];
  return controllers.flatMap((controller) =>
    Object.getOwnPropertyNames(controller.prototype)
      .filter((name) => name !== 'constructor')
      .map((name) => ({ name, handler: controller.prototype[name as keyof object] as unknown as () => void }))
      .filter(({ handler }) => Reflect.getMetadata(METHOD_METADATA, handler) !== undefined)
      .map(({ name, handler }) => ({
        controller,
        route:
          `${RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as number]} /${Reflect.getMetadata(PATH_METADATA, controller)}/${Reflect.getMetadata(PATH_METADATA, handler)}`
            .replace(/\/{2,}/g, '/')
            .replace(/\/$/, ''),
        where: `${controller.name}.${name}`,
        handler,
        gate: reflector.getAllAndOverride<GateRouteSpec | undefined>('eventmesh:gate-route', [handler, controller]),
      })),
  );
}

import { RequestMethod } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { Reflector } from '@nestjs/core';
import { GatewayModule } from './gateway.module';
import { AdminMetricsController, MetricsController } from './metrics.controller';
import type { GateRouteSpec } from './gate-route';

/** Every route of the gateway declares how the gate treats it; a route without a declaration would be refused at run time. */
describe('gate declarations', () => {
  const reflector = new Reflector();
  // Both /metrics controllers (the module registers one, as EVENTMESH_METRICS_ADMIN_GATE says).
  const controllers = [...(GatewayModule.register({} as never).controllers ?? []), MetricsController, AdminMetricsController] as (new (...args: never[]) => object)[];
  const routes = controllers.flatMap((controller) =>
    Object.getOwnPropertyNames(controller.prototype)
      .filter((name) => name !== 'constructor')
      .map((name) => ({ controller, name, handler: controller.prototype[name as keyof object] as unknown as () => void }))
      .filter(({ handler }) => Reflect.getMetadata(METHOD_METADATA, handler) !== undefined)
      .map(({ controller, name, handler }) => ({
        route: `${RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as number]} /${Reflect.getMetadata(PATH_METADATA, controller)}/${Reflect.getMetadata(PATH_METADATA, handler)} (${controller.name}.${name})`.replace(/\/{2,}/g, '/'),
        spec: reflector.getAllAndOverride<GateRouteSpec | undefined>('eventmesh:gate-route', [handler, controller]),
      })),
  );

  it('finds the routes', () => {
    expect(routes.length).toBeGreaterThan(15);
  });

  it.each(routes.map((r) => [r.route, r.spec]))('%s declares its gate', (_, spec) => {
    expect(spec).toBeDefined();
  });

  it('admin routes use the admin gate and only /health, the public /metrics and the API document are public', () => {
    for (const { route, spec } of routes) {
      if (route.includes(' /admin/')) expect(spec).toMatchObject({ admin: true, action: 'admin' });
      if (spec && 'public' in spec) expect(route).toMatch(/^GET \/health\/|^GET \/metrics\/\/? \(MetricsController\.|^GET \/(openapi\.json |docs )/);
    }
  });

  it('the admin-gated /metrics is an operator route', () => {
    expect(routes.find((r) => r.route.includes('AdminMetricsController'))?.spec).toEqual({ action: 'admin', admin: true, operator: true });
  });
});

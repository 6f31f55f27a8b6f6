import { RequestMethod } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { FASTIFY_ROUTE_CONFIG_METADATA } from '@nestjs/platform-fastify/constants';
import { Reflector } from '@nestjs/core';
import { API_DOC, RouteDoc } from './api-route';
import { GatewayModule } from './gateway.module';
import type { GateRouteSpec } from './gate-route';
import { openApiDocument, openApiPathOf, undocumented } from './openapi';

/**
 * Each Nest route declares its entry of the API document next to itself (the running app's route table is checked
 * against the document in test/integration/openapi.spec.ts): here, what each entry must say.
 */
describe('API route declarations', () => {
  const reflector = new Reflector();
  const controllers = (GatewayModule.register({} as never).controllers ?? []) as (new (...args: never[]) => object)[];
  const routes = controllers.flatMap((controller) =>
    Object.getOwnPropertyNames(controller.prototype)
      .filter((name) => name !== 'constructor')
      .map((name) => ({ controller, name, handler: controller.prototype[name as keyof object] as unknown as () => void }))
      .filter(({ handler }) => Reflect.getMetadata(METHOD_METADATA, handler) !== undefined)
      .map(({ controller, name, handler }) => ({
        route: `${RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as number]} /${Reflect.getMetadata(PATH_METADATA, controller)}/${Reflect.getMetadata(PATH_METADATA, handler)}`.replace(/\/{2,}/g, '/').replace(/\/$/, ''),
        where: `${controller.name}.${name}`,
        doc: (Reflect.getMetadata(FASTIFY_ROUTE_CONFIG_METADATA, handler) as Record<string, RouteDoc> | undefined)?.[API_DOC],
        gate: reflector.getAllAndOverride<GateRouteSpec | undefined>('eventmesh:gate-route', [handler, controller]),
      })),
  );

  it('finds the routes', () => {
    expect(routes.length).toBeGreaterThan(30);
  });

  it.each(routes.map((r) => [`${r.route} (${r.where})`, r]))('%s declares its doc: path parameters, a success status, the gate\'s refusals', (_, r) => {
    const { doc, gate, route } = r as (typeof routes)[number];
    expect(doc).toBeDefined();
    const { params } = openApiPathOf(route.split(' ')[1]);
    for (const name of params) expect([name, doc?.params?.[name === 'rest' ? '*' : name]]).toEqual([name, expect.any(String)]);
    const statuses = Object.keys(doc?.responses ?? {}).map(Number);
    expect(statuses.some((s) => s >= 100 && s < 300)).toBe(true);
    if (gate && !('public' in gate)) expect(statuses).toEqual(expect.arrayContaining([401, 403]));
  });

  it('a route without a doc is named as undocumented', () => {
    const doc: RouteDoc = { summary: 's', responses: { 200: { description: 'ok' } } };
    const served = [
      { method: 'GET', url: '/a/:id', doc },
      { method: 'POST', url: '/a/:id/rest/*' },
    ];
    const document = openApiDocument(served, '0');
    expect(Object.keys(document.paths)).toEqual(['/a/{id}']);
    expect(undocumented(served, document)).toEqual(['POST /a/:id/rest/*']);
  });
});

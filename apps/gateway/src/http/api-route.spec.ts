import { FASTIFY_ROUTE_CONFIG_METADATA } from '@nestjs/platform-fastify/constants';
import { API_DOC, RouteDoc } from './api-route';
import { gatewayNestRoutes } from './nest-routes';
import { openApiDocument, openApiPathOf, undocumented } from '../operations/openapi';

/**
 * Each Nest route declares its entry of the API document next to itself (the running app's route table is checked
 * against the document in test/integration/http-contract.spec.ts): here, what each entry must say.
 */
describe('API route declarations', () => {
  const routes = gatewayNestRoutes().map(({ route, where, handler, gate }) => ({
    route,
    where,
    gate,
    doc: (Reflect.getMetadata(FASTIFY_ROUTE_CONFIG_METADATA, handler) as Record<string, RouteDoc> | undefined)?.[
      API_DOC
    ],
  }));

  it('finds the routes', () => {
    expect(routes.length).toBeGreaterThan(30);
  });

  it.each(routes.map((r) => [`${r.route} (${r.where})`, r]))(
    "%s declares its doc: path parameters, a success status, the gate's refusals",
    (_, r) => {
      const { doc, gate, route } = r as (typeof routes)[number];
      expect(doc).toBeDefined();
      const { params } = openApiPathOf(route.split(' ')[1]);
      for (const name of params) {
        const param = doc?.params?.[name === 'rest' ? '*' : name];
        expect([name, typeof param === 'string' ? param : param?.description]).toEqual([name, expect.any(String)]);
      }
      const statuses = Object.keys(doc?.responses ?? {}).map(Number);
      expect(statuses.some((s) => s >= 100 && s < 300)).toBe(true);
      if (gate && !('public' in gate)) expect(statuses).toEqual(expect.arrayContaining([401, 403]));
    },
  );

  it.each([
    ['open', [], [], []],
    ['enforcing', ['token', 'quota'], 'credential', 'credential'],
    ['report-only', ['token', 'quota'], 'credential', 'credential or none'],
    ['enforcing', ['quota'], 'credential', []],
  ] as const)(
    'a %s gate running %j: admin routes want %j, data routes %j, public routes nothing',
    (mode, filters, admin, data) => {
      const credential = [{ bearer: [] }, { apiKey: [] }];
      const wanted = (w: string | readonly never[]) =>
        w === 'credential' ? credential : w === 'credential or none' ? [...credential, {}] : [];
      const doc: RouteDoc = { summary: 's', responses: { 200: { description: 'ok' } } };
      const served = [
        { method: 'GET', url: '/admin/x', doc, gate: { action: 'admin', admin: true } as const },
        { method: 'GET', url: '/data', doc, gate: { action: 'subscribe' } as const },
        { method: 'GET', url: '/public', doc, gate: { public: true } as const },
      ];
      const gate = { mode, filters: [...filters] };
      const document = openApiDocument(served, '0', { ingress: gate, admin: gate });
      expect([
        document.paths['/admin/x'].get.security,
        document.paths['/data'].get.security,
        document.paths['/public'].get.security,
      ]).toEqual([wanted(admin), wanted(data), []]);
    },
  );

  it('a route without a doc is named as undocumented', () => {
    const doc: RouteDoc = { summary: 's', responses: { 200: { description: 'ok' } } };
    const served = [
      { method: 'GET', url: '/a/:id', doc },
      { method: 'POST', url: '/a/:id/rest/*' },
    ];
    const document = openApiDocument(served, '0', {
      ingress: { mode: 'open', filters: [] },
      admin: { mode: 'open', filters: [] },
    });
    expect(Object.keys(document.paths)).toEqual(['/a/{id}']);
    expect(undocumented(served, document)).toEqual(['POST /a/:id/rest/*']);
  });
});

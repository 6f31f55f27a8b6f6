import { gatewayNestRoutes } from './nest-routes';

/** Every route of the gateway declares how the gate treats it; a route without a declaration would be refused at run time. */
describe('gate declarations', () => {
  const routes = gatewayNestRoutes().map((r) => ({ route: `${r.route} (${r.where})`, spec: r.gate }));

  it('finds the routes', () => {
    expect(routes.length).toBeGreaterThan(15);
  });

  it.each(routes.map((r) => [r.route, r.spec]))('%s declares its gate', (_, spec) => {
    expect(spec).toBeDefined();
  });

  it('admin routes use the admin gate and only /health, the public /metrics and the API document are public', () => {
    for (const { route, spec } of routes) {
      if (route.includes(' /admin/')) expect(spec).toMatchObject({ admin: true, action: 'admin' });
      if (spec && 'public' in spec) expect(route).toMatch(/^GET \/health[ /]|^GET \/metrics \(MetricsController\.|^GET \/(openapi\.json|docs) /);
    }
  });

  it('the admin-gated /metrics is an operator route', () => {
    expect(routes.find((r) => r.route.includes('AdminMetricsController'))?.spec).toEqual({ action: 'admin', admin: true, operator: true });
  });
});

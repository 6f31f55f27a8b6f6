import { gateRequestOf, Gates, GateRouteSpec, RouteRequest } from './gate-route';
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
      if (spec && 'public' in spec)
        expect(route).toMatch(/^GET \/health[ /]|^GET \/metrics \(MetricsController\.|^GET \/(openapi\.json|docs) /);
    }
  });

  it('the admin-gated /metrics is an operator route', () => {
    expect(routes.find((r) => r.route.includes('AdminMetricsController'))?.spec).toEqual({
      action: 'admin',
      admin: true,
      operator: true,
    });
  });
});

/** The routes that hold a stream connection are counted against the tenant's stream quota (the gate's `stream`). */
describe('stream declarations', () => {
  const routes = gatewayNestRoutes();
  const gates = new Gates({} as never, {} as never, async () => undefined, 'events');
  const specOf = (route: string) => {
    const spec = routes.find((r) => r.route === route)?.gate;
    if (!spec || 'public' in spec) throw new Error(`no gated route ${route}`);
    return spec as Exclude<GateRouteSpec, { public: true }>;
  };
  const streams = (route: string, r: Partial<RouteRequest>) =>
    gateRequestOf(gates, specOf(route), { route, headers: {}, remoteAddress: '127.0.0.1', ...r }).stream === true;
  const rpc = (body: unknown) => ({ raw: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)) });

  it('the stream transports of subscriptions always hold one', () => {
    expect(streams('GET /subscriptions/:id/events', {})).toBe(true);
  });

  it("an A2A agent's JSON-RPC endpoint holds one for the streaming methods only, by the body's method", () => {
    const route = 'POST /a2a/agents/:name/rpc';
    for (const method of ['SendStreamingMessage', 'SubscribeToTask', 'message/stream', 'tasks/resubscribe'])
      expect(streams(route, rpc({ jsonrpc: '2.0', id: 1, method }))).toBe(true);
    for (const method of ['SendMessage', 'GetTask', 'message/send', 'tasks/get'])
      expect(streams(route, rpc({ jsonrpc: '2.0', id: 1, method }))).toBe(false);
    // What the endpoint answers with a JSON-RPC error is no stream.
    expect(streams(route, rpc('{"method":'))).toBe(false);
    expect(streams(route, rpc('null'))).toBe(false);
    expect(streams(route, {})).toBe(false);
  });

  it("the HTTP+JSON binding's streams hold one: message:stream and tasks/{id}:subscribe", () => {
    expect(streams('POST /a2a/agents/:name/rest/*', { params: { name: 'a', '*': 'message:stream' } })).toBe(true);
    expect(streams('POST /a2a/agents/:name/rest/*', { params: { name: 'a', '*': 'tasks/t-1:subscribe' } })).toBe(true);
    expect(streams('POST /a2a/agents/:name/rest/*', { params: { name: 'a', '*': 'message:send' } })).toBe(false);
    expect(streams('POST /a2a/agents/:name/rest/*', { params: { name: 'a', '*': 'tasks/t-1:cancel' } })).toBe(false);
    expect(streams('GET /a2a/agents/:name/rest/tasks/:id', { params: { name: 'a', id: 't-1:subscribe' } })).toBe(true);
    expect(streams('GET /a2a/agents/:name/rest/tasks/:id', { params: { name: 'a', id: 't-1' } })).toBe(false);
  });
});

import type { FastifyInstance } from 'fastify';
import { API_DOC, API_GATE, RouteDoc } from './api-route';
import type { GateRouteSpec } from './gate-route';

/** One route the gateway serves, with the doc it declared (undefined: it declared none). */
export interface ServedRoute {
  method: string;
  /** The route's path as registered (`/subscriptions/:id`). */
  url: string;
  doc?: RouteDoc;
  /** How the gate treats it (the document's `security`); undefined: no gate of the runtime's (the internal channel). */
  gate?: GateRouteSpec;
  /** Served on the HTTP server ahead of Fastify (publish-route.ts), not by Fastify's router. */
  aheadOfRouter?: boolean;
}

/**
 * The routes the running gateway serves: every route Fastify registers (Nest's controllers, the WebSocket routes),
 * seen through Fastify's `onRoute` hook, plus the routes served ahead of Fastify. The API document is made from it
 * (openapi.ts), so what the document lists is what is served, and a route that declared no doc is known.
 */
export class RouteTable {
  private readonly served: ServedRoute[] = [];
  /** The gates of Nest's routes by `METHOD /path` (their `@GateRoute`, which Fastify's route config does not carry). */
  private readonly gates = new Map<string, GateRouteSpec | undefined>();

  /** Records every route registered on `fastify` from now on (call before the app registers its routes). */
  attach(fastify: FastifyInstance): void {
    fastify.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      const config = route.config as Record<string, unknown> | undefined;
      const doc = config?.[API_DOC] as RouteDoc | undefined;
      const gate = config?.[API_GATE] as GateRouteSpec | undefined;
      for (const method of methods) this.served.push({ method: method.toUpperCase(), url: route.url, doc, gate });
    });
  }

  /** A route served ahead of Fastify's router. */
  addAheadOfRouter(method: string, url: string, doc: RouteDoc, gate: GateRouteSpec): void {
    this.served.push({ method, url, doc, gate, aheadOfRouter: true });
  }

  /** The gates of Nest's routes (nest-routes.ts, `nestRoutesOf`), as `METHOD /path`. */
  declareGates(routes: { route: string; gate: GateRouteSpec | undefined }[]): void {
    for (const { route, gate } of routes) this.gates.set(route, gate);
  }

  /** How the gate treats `METHOD url` (a route as registered), read once every route is (the first request on). */
  gateOf(method: string, url: string): GateRouteSpec | undefined {
    this.byRoute ??= new Map(this.routes().map((r) => [`${r.method} ${r.url}`, r.gate]));
    return this.byRoute.get(`${method} ${url}`);
  }

  private byRoute?: Map<string, GateRouteSpec | undefined>;

  /**
   * The routes, each once: a HEAD route Fastify adds beside a GET route (`exposeHeadRoutes`) is the GET route's
   * and is not listed on its own.
   */
  routes(): ServedRoute[] {
    const gets = new Set(this.served.filter((r) => r.method === 'GET').map((r) => r.url));
    const seen = new Set<string>();
    return this.served
      .filter((r) => {
        const key = `${r.method} ${r.url}`;
        if ((r.method === 'HEAD' && gets.has(r.url)) || seen.has(key)) return false;
        seen.add(key);
        return true;
      })
      .map((r) =>
        r.gate || !this.gates.has(`${r.method} ${r.url}`) ? r : { ...r, gate: this.gates.get(`${r.method} ${r.url}`) },
      );
  }
}

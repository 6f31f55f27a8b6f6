import type { FastifyInstance } from 'fastify';
import { API_DOC, RouteDoc } from './api-route';

/** One route the gateway serves, with the doc it declared (undefined: it declared none). */
export interface ServedRoute {
  method: string;
  /** The route's path as registered (`/subscriptions/:id`). */
  url: string;
  doc?: RouteDoc;
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

  /** Records every route registered on `fastify` from now on (call before the app registers its routes). */
  attach(fastify: FastifyInstance): void {
    fastify.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      const doc = (route.config as Record<string, unknown> | undefined)?.[API_DOC] as RouteDoc | undefined;
      for (const method of methods) this.served.push({ method: method.toUpperCase(), url: route.url, doc });
    });
  }

  /** A route served ahead of Fastify's router. */
  addAheadOfRouter(method: string, url: string, doc: RouteDoc): void {
    this.served.push({ method, url, doc, aheadOfRouter: true });
  }

  /**
   * The routes, each once: a HEAD route Fastify adds beside a GET route (`exposeHeadRoutes`) is the GET route's
   * and is not listed on its own.
   */
  routes(): ServedRoute[] {
    const gets = new Set(this.served.filter((r) => r.method === 'GET').map((r) => r.url));
    const seen = new Set<string>();
    return this.served.filter((r) => {
      const key = `${r.method} ${r.url}`;
      if ((r.method === 'HEAD' && gets.has(r.url)) || seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }
}

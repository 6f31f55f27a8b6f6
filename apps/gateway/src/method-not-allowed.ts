import type { FastifyInstance } from 'fastify';
import { ErrorCode, EventMeshError } from '../../../libs/errors';
import { toHttpError } from './http-error';
import type { RouteTable, ServedRoute } from './route-table';

/** A served path as a pattern, and the methods served on it. */
interface PathMethods {
  pattern: RegExp;
  methods: Set<string>;
}

/** `/subscriptions/:id/rest/*` as a pattern of the request paths it serves. */
function patternOf(url: string): RegExp {
  const source = url
    .split('/')
    .map((segment) => (segment === '*' ? '.*' : segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${source}$`);
}

/** The methods served on each path of the table; GET serves HEAD too (Fastify's `exposeHeadRoutes`). */
function pathMethodsOf(routes: ServedRoute[]): PathMethods[] {
  const byUrl = new Map<string, Set<string>>();
  for (const { method, url } of routes) {
    const methods = byUrl.get(url) ?? new Set<string>();
    methods.add(method);
    if (method === 'GET') methods.add('HEAD');
    byUrl.set(url, methods);
  }
  return [...byUrl].map(([url, methods]) => ({ pattern: patternOf(url), methods }));
}

/**
 * A request Fastify's router found no route for, on a path the gateway serves with other methods (`TRACE
 * /subscriptions`, `QUERY /admin/api-keys/{id}`): 405 with `Allow` and the error body naming the methods
 * (`METHOD_NOT_ALLOWED`, `allow`), where the router would answer 404. A path nothing serves stays 404. The table is
 * read on the first such request (every route is registered by then).
 */
export function registerMethodNotAllowed(fastify: FastifyInstance, routes: RouteTable): void {
  let paths: PathMethods[] | undefined;
  fastify.addHook('onRequest', async (request, reply) => {
    if (!request.is404) return;
    paths ??= pathMethodsOf(routes.routes());
    const path = request.url.split('?')[0];
    const allow = [...new Set(paths.filter((p) => p.pattern.test(path)).flatMap((p) => [...p.methods]))].sort();
    if (allow.length === 0) return;
    const { status, body } = toHttpError(new EventMeshError(ErrorCode.MethodNotAllowed, `${request.method} is not served on ${path}; it serves ${allow.join(', ')}`, { allow }));
    await reply.code(status).header('allow', allow.join(', ')).send(body);
  });
}

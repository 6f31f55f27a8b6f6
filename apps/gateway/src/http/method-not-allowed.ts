import type { FastifyInstance } from 'fastify';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { toHttpError } from './http-error';
import type { RouteTable, ServedRoute } from './route-table';

/** A served path as a pattern, how specific it is, and the methods served on it. */
interface PathMethods {
  pattern: RegExp;
  /** Per segment: 2 static, 1 a parameter, 0 a wildcard. */
  rank: number[];
  methods: Set<string>;
}

const rankOf = (url: string): number[] => url.split('/').map((s) => (s === '*' ? 0 : s.startsWith(':') ? 1 : 2));

/** Which of two ranks names a path more specifically: the first segment where they differ decides. */
function compareRanks(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++)
    if ((a[i] ?? -1) !== (b[i] ?? -1)) return (a[i] ?? -1) - (b[i] ?? -1);
  return 0;
}

/** `/subscriptions/:id/rest/*` as a pattern of the request paths it serves. */
function patternOf(url: string): RegExp {
  const source = url
    .split('/')
    .map((segment) =>
      segment === '*' ? '.*' : segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
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
  return [...byUrl].map(([url, methods]) => ({ pattern: patternOf(url), rank: rankOf(url), methods }));
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
    const matching = paths.filter((p) => p.pattern.test(path));
    // The resource the path names is its most specific pattern's (`.../dead-letters/replays`, not the letter
    // `replays`; `.../rest/tasks`, not the wildcard under `rest`): the methods of that resource.
    const best = matching.reduce<number[] | undefined>(
      (top, p) => (top === undefined || compareRanks(p.rank, top) > 0 ? p.rank : top),
      undefined,
    );
    const allow = [
      ...new Set(matching.filter((p) => compareRanks(p.rank, best!) === 0).flatMap((p) => [...p.methods])),
    ].sort();
    if (allow.length === 0) return;
    const { status, body } = toHttpError(
      new EventMeshError(
        ErrorCode.MethodNotAllowed,
        `${request.method} is not served on ${path}; it serves ${allow.join(', ')}`,
        { allow },
      ),
    );
    await reply.code(status).header('allow', allow.join(', ')).send(body);
  });
}

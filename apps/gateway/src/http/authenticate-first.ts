import type { FastifyInstance } from 'fastify';
import type { IncomingMessage } from 'node:http';
import { gateRequestOf, type Gates, keepAuthenticated, routeRequestOf } from './gate-route';
import { replyError } from './http-error';
import type { RouteTable } from './route-table';

/**
 * Every gated route served by Fastify authenticates a request that carries a body from its headers before the body
 * is read, as the publish route does (`SecurityGate.authenticate`): an enforcing gate refuses an unknown caller, and
 * any gate refuses an unauthenticated caller of an admin route (report-only never hands out power), with 401 or
 * 403 at once and the connection closed, so an unauthenticated client cannot make the gateway take in a body. The
 * rest of the gate decides in the route's guard (GateGuard), once the body is read.
 */
export function registerAuthenticateFirst(fastify: FastifyInstance, routes: RouteTable, gates: Gates): void {
  fastify.addHook('preParsing', async (request, reply, payload) => {
    if (!carriesBody(request.raw)) return payload;
    const spec = routes.gateOf(request.method, request.routeOptions.url ?? '');
    if (!spec || 'public' in spec) return payload;
    const gated = gateRequestOf(gates, spec, routeRequestOf(request));
    try {
      await (spec.admin ? gates.admin : gates.ingress).authenticate(gated);
    } catch (e) {
      // The body stays unread: the connection closes after the answer.
      return replyError(reply, e, { connection: 'close' });
    }
    keepAuthenticated(request, gated);
    return payload;
  });
}

/** Whether the request says it sends a body (a length above 0, or chunks). */
function carriesBody(request: IncomingMessage): boolean {
  const length = request.headers['content-length'];
  return (length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined;
}

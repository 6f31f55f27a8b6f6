import type { FastifyRequest } from 'fastify';
import { A2ABroker, MeshTaskHandler } from '@libs/a2a';
import { EventMeshError, HTTP_STATUS_BY_CODE } from '@libs/errors';
import type { Caller } from '@libs/security';
import { a2aUrlsOf } from './a2a-paths';
import { outageOf } from '../http/http-error';
import type { Gates } from '../http/gate-route';

/** The request handler of one call to an agent's endpoint (JSON-RPC or HTTP+JSON), for the caller's tenant. */
export async function meshHandlerOf(
  broker: A2ABroker,
  gates: Gates,
  caller: Caller,
  name: string,
  request: FastifyRequest,
): Promise<MeshTaskHandler> {
  const agent = await broker.agent(caller.tenant, name);
  const card = broker.cardOf(agent, a2aUrlsOf(request, name), {
    tokens: gates.ingress.stats().filters.includes('token'),
  });
  return broker.handlerFor(caller.tenant, agent, card);
}

export function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first.trim() === '' ? undefined : first.trim();
}

/**
 * A failure of the runtime's own that every route answers 503 with `Retry-After` (the error filter, http-error.ts):
 * Postgres unavailable, Kafka unavailable, a bound on held work reached. The A2A endpoints throw it to the filter
 * rather than answer it in the protocol as an internal error: the client learns it may send again.
 */
export function isUnavailable(e: unknown): boolean {
  return outageOf(e) !== undefined || (e instanceof EventMeshError && HTTP_STATUS_BY_CODE[e.code] === 503);
}

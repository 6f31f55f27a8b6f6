import type { FastifyRequest } from 'fastify';
import { A2ABroker, MeshTaskHandler } from '../../../libs/a2a';
import type { Caller } from '../../../libs/security';
import { a2aUrlsOf } from './a2a-paths';
import type { Gates } from './gate-route';

/** The request handler of one call to an agent's endpoint (JSON-RPC or HTTP+JSON), for the caller's tenant. */
export async function meshHandlerOf(broker: A2ABroker, gates: Gates, caller: Caller, name: string, request: FastifyRequest): Promise<MeshTaskHandler> {
  const agent = await broker.agent(caller.tenant, name);
  const card = broker.cardOf(agent, a2aUrlsOf(request, name), { tokens: gates.ingress.stats().filters.includes('token') });
  return broker.handlerFor(caller.tenant, agent, card);
}

export function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first.trim() === '' ? undefined : first.trim();
}

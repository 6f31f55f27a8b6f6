import type { FastifyRequest } from 'fastify';

/** The JSON-RPC endpoint of an agent: its body is parsed by the route (a parse error is JSON-RPC's -32700, not a 400). */
const RPC_PATH = /^\/a2a\/agents\/[^/?]+\/rpc(?:\?|$)/;

export function isA2ARpcPath(url: string): boolean {
  return RPC_PATH.test(url);
}

/** The mesh's URL of an agent's JSON-RPC endpoint, as the client reached this gateway (its Host header). */
export function a2aRpcUrlOf(request: FastifyRequest, name: string): string {
  return `${request.protocol}://${request.headers.host ?? request.hostname}/a2a/agents/${encodeURIComponent(name)}/rpc`;
}

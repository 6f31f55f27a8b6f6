import type { FastifyRequest } from 'fastify';

/**
 * An agent's JSON-RPC endpoint and HTTP+JSON routes: their bodies are parsed by the routes (a parse error is the
 * protocol's: JSON-RPC's -32700, the REST binding's 400 error body, not the runtime's `MALFORMED_JSON`).
 */
const OWN_BODY_PATH = /^\/a2a\/agents\/[^/?]+\/(?:rpc(?:\?|$)|rest\/)/;

export function parsesOwnBody(url: string): boolean {
  return OWN_BODY_PATH.test(url);
}

/** The mesh's endpoints of an agent, as the client reached this gateway (its Host header). */
export function a2aUrlsOf(request: FastifyRequest, name: string): { rpcUrl: string; restUrl: string } {
  const base = `${request.protocol}://${request.headers.host ?? request.hostname}/a2a/agents/${encodeURIComponent(name)}`;
  return { rpcUrl: `${base}/rpc`, restUrl: `${base}/rest` };
}

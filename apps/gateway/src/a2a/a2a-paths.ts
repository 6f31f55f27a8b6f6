import type { FastifyRequest } from 'fastify';

/**
 * An agent's JSON-RPC endpoint and HTTP+JSON routes, and the mesh's own JSON-RPC endpoint: their bodies are parsed by the routes (a parse error is the
 * protocol's: JSON-RPC's -32700, the REST binding's 400 error body, not the runtime's `MALFORMED_JSON`).
 */
const OWN_BODY_PATH = /^\/a2a\/(?:agents\/[^/?]+\/(?:rpc(?:\?|$)|rest\/)|rpc(?:\?|$))/;

export function parsesOwnBody(url: string): boolean {
  return OWN_BODY_PATH.test(url);
}

/** The mesh's URL, as the client reached this gateway (its Host header). */
const hostBaseOf = (request: FastifyRequest): string =>
  `${request.protocol}://${request.headers.host ?? request.hostname}`;

/** An agent's base URL on the mesh, as the client reached this gateway (its Host header). */
const agentBaseOf = (request: FastifyRequest, name: string): string =>
  `${hostBaseOf(request)}/a2a/agents/${encodeURIComponent(name)}`;

/** The mesh's own JSON-RPC endpoint (the interface of its card at the host root). */
export const meshRpcUrlOf = (request: FastifyRequest): string => `${hostBaseOf(request)}/a2a/rpc`;

/** The mesh's endpoints of an agent, as the client reached this gateway (its Host header). */
export function a2aUrlsOf(request: FastifyRequest, name: string): { rpcUrl: string; restUrl: string } {
  const base = agentBaseOf(request, name);
  return { rpcUrl: `${base}/rpc`, restUrl: `${base}/rest` };
}

/** The URL of the card the mesh serves for an agent. */
export const a2aCardUrlOf = (request: FastifyRequest, name: string): string =>
  `${agentBaseOf(request, name)}/.well-known/agent-card.json`;

/** The JSON-RPC methods answered with an SSE stream (v1.0 and v0.3 names). */
export const RPC_STREAM_METHODS: ReadonlySet<string> = new Set([
  'SendStreamingMessage',
  'SubscribeToTask',
  'message/stream',
  'tasks/resubscribe',
]);

/** Whether a JSON-RPC request body calls a streaming method (the gate counts the stream against the tenant's quota). */
export function callsRpcStream({ raw }: { raw?: Buffer }): boolean {
  return callsOneOf(raw, RPC_STREAM_METHODS);
}

function callsOneOf(raw: Buffer | undefined, methods: ReadonlySet<string>): boolean {
  // A body that names none of them does not call one: it is not parsed (the endpoint parses it once, after).
  if (!raw || ![...methods].some((method) => raw.includes(method))) return false;
  try {
    const method = (JSON.parse(raw.toString('utf8')) as { method?: unknown } | null)?.method;
    return typeof method === 'string' && methods.has(method);
  } catch {
    return false;
  }
}

/** The JSON-RPC methods that send a message to the agent: publishes (the tenant's quota, a publisher's signature). */
export const RPC_SEND_METHODS: ReadonlySet<string> = new Set([
  'SendMessage',
  'SendStreamingMessage',
  'message/send',
  'message/stream',
]);

/** Whether a JSON-RPC request body calls a method that sends a message. */
export function callsRpcSend({ raw }: { raw?: Buffer }): boolean {
  return callsOneOf(raw, RPC_SEND_METHODS);
}

/** Whether an HTTP+JSON route path (after `/rest/` or `/rest/v1/`) sends a message: `message:send`, `message:stream`. */
export function isRestSend(rest: string): boolean {
  return rest === 'message:send' || rest === 'message:stream';
}

/** Whether an HTTP+JSON route path (after `/rest/`) is one of the binding's streams: `message:stream`, `tasks/{id}:subscribe`. */
export function isRestStream(rest: string): boolean {
  return rest === 'message:stream' || /^tasks\/[^/]+:subscribe$/.test(rest);
}

import { RouteConfig } from '@nestjs/platform-fastify';
import { z } from 'zod';
import type { GateRouteSpec } from './gate-route';

/**
 * What the API document (`/openapi.json`, openapi.ts) says of one route, declared next to the route: on a Nest
 * handler with `@ApiRoute(doc)`, on a route registered on Fastify directly in its `config` (`apiRouteConfig(doc)`),
 * and for the route served ahead of Fastify (publish-route.ts) where the gateway adds it to the route table.
 * Schemas are zod schemas: the ones the route validates with where it validates with zod, else written here to
 * the route's own checks. They become JSON Schema 2020-12 through `z.toJSONSchema`.
 */
export interface RouteDoc {
  summary: string;
  description?: string;
  /** Groups in the document; the path's first segment when absent. */
  tags?: string[];
  /**
   * Path parameters by name (each route parameter must have one): what it names, or a schema (described) where the
   * route refuses some values with 400 rather than 404.
   */
  params?: Record<string, string | z.ZodType>;
  /** Query parameters (an object schema: each property is one parameter). */
  query?: z.ZodObject;
  /** The body: `schema` under each of `contentTypes` (JSON when absent), and under `contentSchemas`' types their own. */
  body?: {
    schema: z.ZodType;
    contentTypes?: string[];
    contentSchemas?: Record<string, z.ZodType>;
    required?: boolean;
    description?: string;
  };
  /** Every status the route answers with, and its body. */
  responses: Record<number, ResponseDoc>;
  /** Not for tenants (the internal stream channel). */
  internal?: boolean;
}

export interface ResponseDoc {
  description: string;
  /** The body's schema (none for an empty body). */
  schema?: z.ZodType;
  /** `application/json` when absent. */
  contentType?: string;
}

/** The keys of a route's doc, and of its gate, in its Fastify route config. */
export const API_DOC = 'eventmesh:api-doc';
export const API_GATE = 'eventmesh:api-gate';

/** A Fastify route's `config` carrying its doc and its gate (routes registered on Fastify directly). */
export function apiRouteConfig(doc: RouteDoc, gate?: GateRouteSpec): Record<string, unknown> {
  return { [API_DOC]: doc, ...(gate ? { [API_GATE]: gate } : {}) };
}

/**
 * Declares a Nest route's doc. It rides in the route's Fastify config (Nest's `RouteConfig`), so the route table
 * the running app registers (route-table.ts) carries it: a route without one is a route missing from the document.
 */
export const ApiRoute = (doc: RouteDoc) => RouteConfig(apiRouteConfig(doc));

/** The runtime's error body, on every 4xx and 5xx (http-error.ts). */
export const errorBodySchema = z.looseObject({
  code: z.string().describe('stable, machine-readable'),
  message: z.string(),
});

const ERROR_MEANINGS: Record<number, string> = {
  400: 'bad input: `code` names it, a `field` where one is at fault',
  401: 'no usable credential (the gate, `UNAUTHENTICATED`)',
  403: 'the credential may not do this (the gate, `FORBIDDEN`)',
  404: "not found (or another tenant's: the same answer)",
  408: 'no reply within the time asked',
  409: 'the current state refuses this',
  413: "the body is over the limit (`PAYLOAD_TOO_LARGE`), or a publish is larger than the tenant's whole burst (`BATCH_EXCEEDS_BURST`, with `maxBatchEvents` and `maxBatchBytes`: it can never pass, split it)",
  415: 'a content type the route does not take',
  421: 'another gateway process than the one named',
  426: 'a WebSocket route asked without `Upgrade: websocket` (`UPGRADE_REQUIRED`); nothing is held',
  429: "over a quota (`QUOTA_EXCEEDED`, with `Retry-After`), or the tenant's request-replies waiting in this gateway process are at their cap (`TOO_MANY_PENDING_REQUESTS`, with `Retry-After`)",
  502: 'a receiver the mesh called did not acknowledge (`httpStatus` and `error` say how)',
  503: 'a dependency or a bound is unavailable for now (`Retry-After`)',
};

/** Error responses by status, each with the error body. */
export function errors(...statuses: number[]): Record<number, ResponseDoc> {
  return Object.fromEntries(
    statuses.map((s) => [s, { description: ERROR_MEANINGS[s] ?? 'error', schema: errorBodySchema }]),
  );
}

/** What the request gate may answer on any gated route (libs/security). */
export const GATED = errors(401, 403, 429, 503);

import { z } from 'zod';
import type { GateStats } from '@libs/security';
import { CLUSTER_TOKEN_HEADER } from '@libs/streams';
import type { ResponseDoc, RouteDoc } from '../http/api-route';
import type { ServedRoute } from '../http/route-table';

/** The name a Fastify wildcard (`*`) has in the document's path (`{rest}`). */
export const WILDCARD_PARAM = 'rest';

export type OpenApiDocument = {
  openapi: '3.1.0';
  info: { title: string; version: string; description: string };
  jsonSchemaDialect: string;
  tags: { name: string }[];
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: { securitySchemes: typeof SECURITY_SCHEMES };
};

/** Which credentials an operation takes: any one of the requirements (`{}`: none needed). */
type SecurityRequirement = Record<string, string[]>;

export interface OpenApiOperation {
  summary: string;
  description?: string;
  tags: string[];
  security: SecurityRequirement[];
  parameters?: Record<string, unknown>[];
  requestBody?: Record<string, unknown>;
  responses: Record<
    string,
    { description: string; headers?: Record<string, object>; content?: Record<string, { schema: object }> }
  >;
  'x-eventmesh-internal'?: true;
  'x-eventmesh-served-ahead-of-router'?: true;
}

/** `/subscriptions/:id/rest/*` as the document writes it (`/subscriptions/{id}/rest/{rest}`), and its parameters. */
export function openApiPathOf(url: string): { path: string; params: string[] } {
  const params: string[] = [];
  const path = url
    .split('/')
    .map((segment) => {
      if (segment === '*') {
        params.push(WILDCARD_PARAM);
        return `{${WILDCARD_PARAM}}`;
      }
      return segment.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => {
        params.push(name);
        return `{${name}}`;
      });
    })
    .join('/');
  return { path, params };
}

/** A zod schema as JSON Schema 2020-12, as the document embeds it (request side: defaults make fields optional). */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  return json;
}

/** The credentials the gates read (libs/security/bearer-credential.ts), and the internal channel's. */
export const SECURITY_SCHEMES = {
  bearer: {
    type: 'http',
    scheme: 'bearer',
    description: 'a JWT of the configured issuer, or an API key (`emk_<id>_<secret>`)',
  },
  apiKey: {
    type: 'apiKey',
    in: 'header',
    name: 'x-api-key',
    description: 'an API key (`emk_<id>_<secret>`); not with `Authorization` too',
  },
  clusterToken: {
    type: 'apiKey',
    in: 'header',
    name: CLUSTER_TOKEN_HEADER,
    description: 'a cluster token of this runtime: its instances only',
  },
} as const;

/** How the running gates admit: the ingress gate's and the admin API's mode and filters (SecurityGate.stats). */
export interface GateModes {
  ingress: Pick<GateStats, 'mode' | 'filters'>;
  admin: Pick<GateStats, 'mode' | 'filters'>;
}

/**
 * What a route's gate wants, as the running gates decide it (libs/security/security-gate.ts): nothing on an open
 * gate or a public route; a credential (either header) where TokenAuth runs enforcing, or on a privileged route
 * (admin, operator) whatever the mode; report-only, a data route proceeds without one too.
 */
function securityOf(route: ServedRoute, gates: GateModes): SecurityRequirement[] {
  if (route.doc?.internal) return [{ clusterToken: [] }];
  const gate = route.gate;
  if (!gate || 'public' in gate) return [];
  const privileged = gate.admin === true || gate.operator === true;
  const { mode, filters } = gate.admin ? gates.admin : gates.ingress;
  if (mode === 'open') return [];
  const credential: SecurityRequirement[] = [{ bearer: [] }, { apiKey: [] }];
  if (privileged) return credential;
  // A gate without TokenAuth authenticates nobody, and admits anonymous callers to its data routes.
  if (!filters.includes('token')) return [];
  return mode === 'report-only' ? [...credential, {}] : credential;
}

/** On every answer but a WebSocket upgrade's (apps/gateway/src/http/request-log.ts). */
const REQUEST_ID_HEADER = {
  'x-request-id': {
    description: "the request's id: the caller's own when usable (1 to 128 of [A-Za-z0-9._:-]), else a fresh UUID",
    schema: { type: 'string' },
  },
};

function responsesOf(responses: Record<number, ResponseDoc>): OpenApiOperation['responses'] {
  const out: OpenApiOperation['responses'] = {};
  for (const [status, r] of Object.entries(responses)) {
    out[status] = {
      description: r.description,
      ...(status === '101' ? {} : { headers: REQUEST_ID_HEADER }),
      ...(r.schema
        ? { content: { [r.contentType ?? 'application/json']: { schema: jsonSchemaOf(r.schema, 'output') } } }
        : {}),
    };
  }
  return out;
}

function operationOf(route: ServedRoute, doc: RouteDoc, params: string[], gates: GateModes): OpenApiOperation {
  const parameters: Record<string, unknown>[] = params.map((name) => {
    const param = doc.params?.[name === WILDCARD_PARAM ? '*' : name] ?? '';
    return typeof param === 'string'
      ? { name, in: 'path', required: true, schema: { type: 'string' }, description: param }
      : {
          name,
          in: 'path',
          required: true,
          schema: jsonSchemaOf(param, 'input'),
          description: param.description ?? '',
        };
  });
  for (const [name, schema] of Object.entries(doc.query?.shape ?? {})) {
    const s = schema as z.ZodType;
    parameters.push({
      name,
      in: 'query',
      required: !s.safeParse(undefined).success,
      schema: jsonSchemaOf(s, 'input'),
      ...(s.description ? { description: s.description } : {}),
    });
  }
  const body = doc.body;
  return {
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: doc.tags ?? [tagOf(route.url)],
    security: securityOf(route, gates),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body
      ? {
          requestBody: {
            required: body.required ?? true,
            ...(body.description ? { description: body.description } : {}),
            content: Object.fromEntries([
              ...(body.contentTypes ?? ['application/json']).map((type) => [
                type,
                { schema: jsonSchemaOf(body.schema, 'input') },
              ]),
              ...Object.entries(body.contentSchemas ?? {}).map(([type, schema]) => [
                type,
                { schema: jsonSchemaOf(schema, 'input') },
              ]),
            ]),
          },
        }
      : {}),
    responses: responsesOf(doc.responses),
    ...(doc.internal ? { 'x-eventmesh-internal': true as const } : {}),
    ...(route.aheadOfRouter ? { 'x-eventmesh-served-ahead-of-router': true as const } : {}),
  };
}

const tagOf = (url: string): string => url.split('/').filter((s) => s !== '')[0] ?? 'root';

/**
 * The OpenAPI 3.1 document of the routes the gateway serves: one operation per route that declared its doc
 * (api-route.ts). A route that declared none is left out, and named by `undocumented`.
 */
export function openApiDocument(routes: ServedRoute[], version: string, gates: GateModes): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  const tags = new Set<string>();
  for (const route of routes) {
    if (!route.doc) continue;
    const { path, params } = openApiPathOf(route.url);
    const operation = operationOf(route, route.doc, params, gates);
    operation.tags.forEach((t) => tags.add(t));
    (paths[path] ??= {})[route.method.toLowerCase()] = operation;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'eventmesh',
      version,
      description:
        'CloudEvents over HTTP into Kafka, delivered at least once. Errors are `{ code, message }` with the status the code maps to (docs/api.md). Every response carries `x-request-id`.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    tags: [...tags].sort().map((name) => ({ name })),
    paths,
    components: { securitySchemes: SECURITY_SCHEMES },
  };
}

/** The served routes the document does not list, as `METHOD /path`. */
export function undocumented(routes: ServedRoute[], document: OpenApiDocument): string[] {
  return routes
    .filter((r) => document.paths[openApiPathOf(r.url).path]?.[r.method.toLowerCase()] === undefined)
    .map((r) => `${r.method} ${r.url}`);
}

import { z } from 'zod';
import type { ResponseDoc, RouteDoc } from './api-route';
import type { ServedRoute } from './route-table';

/** The name a Fastify wildcard (`*`) has in the document's path (`{rest}`). */
export const WILDCARD_PARAM = 'rest';

export type OpenApiDocument = {
  openapi: '3.1.0';
  info: { title: string; version: string; description: string };
  jsonSchemaDialect: string;
  tags: { name: string }[];
  paths: Record<string, Record<string, OpenApiOperation>>;
};

export interface OpenApiOperation {
  summary: string;
  description?: string;
  tags: string[];
  parameters?: Record<string, unknown>[];
  requestBody?: Record<string, unknown>;
  responses: Record<string, { description: string; headers?: Record<string, object>; content?: Record<string, { schema: object }> }>;
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
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<string, unknown>;
  return json;
}

/** On every answer but a WebSocket upgrade's (apps/gateway/src/request-log.ts). */
const REQUEST_ID_HEADER = {
  'x-request-id': { description: 'the request\'s id: the caller\'s own when usable (1 to 128 of [A-Za-z0-9._:-]), else a fresh UUID', schema: { type: 'string' } },
};

function responsesOf(responses: Record<number, ResponseDoc>): OpenApiOperation['responses'] {
  const out: OpenApiOperation['responses'] = {};
  for (const [status, r] of Object.entries(responses)) {
    out[status] = {
      description: r.description,
      ...(status === '101' ? {} : { headers: REQUEST_ID_HEADER }),
      ...(r.schema ? { content: { [r.contentType ?? 'application/json']: { schema: jsonSchemaOf(r.schema, 'output') } } } : {}),
    };
  }
  return out;
}

function operationOf(route: ServedRoute, doc: RouteDoc, params: string[]): OpenApiOperation {
  const parameters: Record<string, unknown>[] = params.map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: { type: 'string' },
    description: doc.params?.[name === WILDCARD_PARAM ? '*' : name] ?? '',
  }));
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
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body
      ? {
          requestBody: {
            required: body.required ?? true,
            ...(body.description ? { description: body.description } : {}),
            content: Object.fromEntries((body.contentTypes ?? ['application/json']).map((type) => [type, { schema: jsonSchemaOf(body.schema, 'input') }])),
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
export function openApiDocument(routes: ServedRoute[], version: string): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  const tags = new Set<string>();
  for (const route of routes) {
    if (!route.doc) continue;
    const { path, params } = openApiPathOf(route.url);
    const operation = operationOf(route, route.doc, params);
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
  };
}

/** The served routes the document does not list, as `METHOD /path`. */
export function undocumented(routes: ServedRoute[], document: OpenApiDocument): string[] {
  return routes
    .filter((r) => document.paths[openApiPathOf(r.url).path]?.[r.method.toLowerCase()] === undefined)
    .map((r) => `${r.method} ${r.url}`);
}

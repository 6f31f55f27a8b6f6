import { AgentCard } from '@a2a-js/sdk';
import { z } from 'zod';
import { ErrorCode, EventMeshError } from '@libs/errors';

/** An agent's name in the registry and in its paths: 1 to 64 characters of [A-Za-z0-9._-]. */
export const AGENT_NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** The bindings the mesh can call an agent on (the SDK's client transports the mesh builds, see agent-clients.ts). */
const CALLABLE_BINDINGS = ['JSONRPC', 'HTTP+JSON'];

// The `meta` of these schemas states their refinements in the API document's JSON Schema.
const nonEmpty = z.string().trim().min(1).meta({ pattern: '\\S' });
const httpUrl = z
  .string()
  .refine((value) => {
    try {
      return ['http:', 'https:'].includes(new URL(value).protocol);
    } catch {
      return false;
    }
  }, 'must be an absolute http(s) URL')
  .meta({ format: 'uri', pattern: '^[Hh][Tt][Tt][Pp][Ss]?://' });

/**
 * What a registered agent card must hold (A2A v1.0 `AgentCard`, JSON): the fields the specification marks required,
 * and at least one interface the mesh can call. Other fields (provider, security schemes, icon, ...) are kept as
 * given.
 */
const agentInterface = z.looseObject({
  url: httpUrl,
  protocolBinding: nonEmpty,
  protocolVersion: nonEmpty,
  tenant: z.string().optional(),
});
export const agentCardSchema = z.looseObject({
  name: nonEmpty,
  description: nonEmpty,
  version: nonEmpty,
  supportedInterfaces: z
    .array(agentInterface)
    .min(1)
    .refine((interfaces) => interfaces.some((i) => CALLABLE_BINDINGS.includes(i.protocolBinding)), {
      message: `needs an interface with protocolBinding ${CALLABLE_BINDINGS.join(' or ')}`,
    })
    .meta({ contains: { properties: { protocolBinding: { enum: CALLABLE_BINDINGS } } } }),
  capabilities: z.looseObject({ streaming: z.boolean().optional(), pushNotifications: z.boolean().optional() }),
  defaultInputModes: z.array(nonEmpty),
  defaultOutputModes: z.array(nonEmpty),
  skills: z.array(
    z.looseObject({
      id: nonEmpty,
      name: nonEmpty,
      description: nonEmpty,
      tags: z.array(nonEmpty),
      examples: z.array(z.string()).optional(),
      inputModes: z.array(z.string()).optional(),
      outputModes: z.array(z.string()).optional(),
    }),
  ),
});

/** A mesh subscriber's card: the mesh never calls it, so it may name no interface (the served card names the mesh's). */
const subscriberCardSchema = agentCardSchema.extend({ supportedInterfaces: z.array(agentInterface).default([]) });

export type RegisteredCard = z.infer<typeof agentCardSchema>;

/**
 * The card a registration carries, validated; a 400 `INVALID_AGENT_CARD` naming the first bad field otherwise. An agent
 * at a URL needs an interface the mesh can call; a subscriber needs none.
 */
export function validateAgentCard(body: unknown, style: 'url' | 'subscriber' = 'url'): RegisteredCard {
  const parsed = (style === 'subscriber' ? subscriberCardSchema : agentCardSchema).safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.join('.') || 'card';
    throw new EventMeshError(ErrorCode.InvalidAgentCard, `${field}: ${issue.message}`, { field });
  }
  return parsed.data;
}

/** An agent name from a path, or a 400. */
export function validateAgentName(name: string): string {
  if (!AGENT_NAME.test(name))
    throw new EventMeshError(ErrorCode.InvalidRequest, 'name: 1 to 64 characters of [A-Za-z0-9._-]', { field: 'name' });
  return name;
}

/** The card's lists the A2A specification requires, `[]` included. */
const REQUIRED_LISTS = ['skills', 'defaultInputModes', 'defaultOutputModes'] as const;

/** How the gate authenticates callers, for the security schemes of the cards the mesh serves. */
export interface GateAuthentication {
  /** TokenAuth runs: a bearer JWT (or API key) in `Authorization`, or an API key in `x-api-key`. */
  tokens: boolean;
}

/** The security schemes and requirements of a card the mesh serves: those the request gate enforces. */
export function cardSecurityOf(gate: GateAuthentication): Record<string, unknown> {
  return gate.tokens
    ? {
        securitySchemes: {
          bearer: {
            httpAuthSecurityScheme: {
              scheme: 'Bearer',
              bearerFormat: 'JWT',
              description: 'a token the gate verifies, or an API key (emk_...)',
            },
          },
          apiKey: {
            apiKeySecurityScheme: { location: 'header', name: 'x-api-key', description: 'an API key (emk_...)' },
          },
        },
        securityRequirements: [{ schemes: { bearer: { list: [] } } }, { schemes: { apiKey: { list: [] } } }],
      }
    : { securitySchemes: {}, securityRequirements: [] };
}

/**
 * The card the mesh serves for an agent: the registered card with its interfaces replaced by the mesh's own
 * endpoints for the agent (JSON-RPC, A2A v1.0 and v0.3 selected by the `A2A-Version` header; HTTP+JSON, v1.0 at its base and v0.3 under `v1/`), the capabilities the
 * mesh offers (streaming from its task event logs; push notifications: the mesh pushes the task's updates itself,
 * whatever the agent supports), and the security schemes the request gate enforces. The
 * agent's own signatures are dropped: they sign a card that is no longer the one served.
 */
export function meshCardOf(
  card: RegisteredCard,
  urls: { rpcUrl: string; restUrl: string },
  gate: GateAuthentication,
): Record<string, unknown> {
  const security = cardSecurityOf(gate);
  const served = {
    ...card,
    supportedInterfaces: [
      { url: urls.rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url: urls.restUrl, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
      { url: urls.rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      { url: urls.restUrl, protocolBinding: 'HTTP+JSON', protocolVersion: '0.3' },
    ],
    capabilities: { ...card.capabilities, streaming: true, pushNotifications: true, extendedAgentCard: false },
    ...security,
    signatures: [],
  };
  // Through the SDK's own codec: what is served is a well-formed v1.0 card whatever extra fields were registered.
  // The codec leaves out an empty list; the fields the specification requires are served even when empty.
  const json = AgentCard.toJSON(AgentCard.fromJSON(served)) as Record<string, unknown>;
  for (const field of REQUIRED_LISTS) json[field] ??= [];
  return json;
}

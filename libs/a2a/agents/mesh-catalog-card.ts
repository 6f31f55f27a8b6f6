import { AgentCard } from '@a2a-js/sdk';
import { cardSecurityOf, GateAuthentication, RegisteredCard } from './agent-card';

/** The card extension whose `params.agents` list the tenant's agents and their cards' URLs. */
export const AGENT_CATALOG_EXTENSION = 'urn:eventmesh:a2a:agent-catalog:v1';

/** A registered agent as the catalog names it: its registry name, its card, the URL the mesh serves the card at. */
export interface CatalogAgent {
  name: string;
  card: RegisteredCard;
  cardUrl: string;
}

const unique = (values: string[]): string[] => [...new Set(values)];

/**
 * The card of the mesh itself, served at the host root (`/.well-known/agent-card.json`, where a client that knows
 * only the host looks): a catalog of the tenant's agents. Each agent is one skill (its registry name as the id, its
 * card's name and description, its skills' tags and examples) whose description ends with the agent's card URL; the
 * extension AGENT_CATALOG_EXTENSION lists the same as data (`params.agents`: name, cardUrl, skill ids). Its interface
 * is the mesh's own JSON-RPC endpoint (`rpcUrl`, A2A v1.0), which routes a message to the agent its metadata's
 * `skillId` names (apps/gateway/src/a2a/a2a-mesh-routing.ts); a client may as well send through the agent's own card.
 * Shaped by the SDK's codec like the agents' cards; the lists the specification requires are served even when empty.
 */
export function meshCatalogCardOf(
  tenant: string,
  agents: CatalogAgent[],
  rpcUrl: string,
  gate: GateAuthentication,
): Record<string, unknown> {
  const card = {
    name: 'eventmesh',
    description: `The A2A agents tenant "${tenant}" registered on this event mesh, one skill each. A message sent to this card's interface goes to the agent its metadata's "skillId" names (a skill id here); each agent's own card's URL ends its skill's description (and is in the ${AGENT_CATALOG_EXTENSION} extension).`,
    version: '1.0',
    supportedInterfaces: [{ url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    capabilities: {
      streaming: true,
      pushNotifications: false,
      extendedAgentCard: false,
      extensions: [
        {
          uri: AGENT_CATALOG_EXTENSION,
          description: "the tenant's agents: name, card URL, skill ids",
          required: false,
          params: {
            agents: agents.map((a) => ({ name: a.name, cardUrl: a.cardUrl, skills: a.card.skills.map((s) => s.id) })),
          },
        },
      ],
    },
    defaultInputModes: unique(agents.flatMap((a) => a.card.defaultInputModes)),
    defaultOutputModes: unique(agents.flatMap((a) => a.card.defaultOutputModes)),
    skills: agents.map((a) => ({
      id: a.name,
      name: a.card.name,
      description: `${a.card.description} Agent card: ${a.cardUrl}`,
      tags: unique(a.card.skills.flatMap((s) => s.tags)),
      examples: unique(a.card.skills.flatMap((s) => s.examples ?? [])),
    })),
    ...cardSecurityOf(gate),
    signatures: [],
  };
  const json = AgentCard.toJSON(AgentCard.fromJSON(card)) as Record<string, unknown>;
  for (const field of ['supportedInterfaces', 'skills', 'defaultInputModes', 'defaultOutputModes']) json[field] ??= [];
  return json;
}

import { A2AAgentRows, type StoredAgentRow } from '@libs/storage';
import type { RegisteredCard } from './agent-card';

export { AGENT_STYLES, type AgentFilter, type AgentStyle } from '@libs/storage';

/** A registered agent, its card as the A2A feature validates it (agent-card.ts). */
export type StoredAgent = StoredAgentRow<RegisteredCard>;

/** The `a2a_agents` table (libs/storage/a2a/agent-store.ts), its cards typed as agent-card.ts validates them. */
export class A2AAgentStore extends A2AAgentRows<RegisteredCard> {}

import { AgentCard } from '@a2a-js/sdk';
import { Client, ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import type { Agent as UndiciAgent } from 'undici';
import type { StoredAgent } from '../agents/agent-store';
import { requestFetch } from './request-fetch';

/**
 * The mesh's A2A clients of the registered agents: the SDK's stock client, built from each agent's registered card
 * (JSON-RPC or HTTP+JSON, v1.0 or v0.3 as the card's interfaces say), one per agent and card version. Every
 * connection goes through `dispatcher` (the sink guard's pinned connector: the SSRF rules of webhook sinks apply to
 * agent URLs too), every call is bounded by `timeoutMs`, and every answer by `maxAnswerBytes` (request-fetch.ts).
 */
export class AgentClients {
  private readonly clients = new Map<string, { updatedAt: number; client: Promise<Client> }>();
  private readonly factory: ClientFactory;

  constructor(
    dispatcher: UndiciAgent,
    readonly timeoutMs: number,
    maxAnswerBytes: number,
  ) {
    const fetchImpl = requestFetch(dispatcher, maxAnswerBytes);
    const legacyCompat = { enabled: true };
    this.factory = new ClientFactory({
      transports: [
        new JsonRpcTransportFactory({ fetchImpl, legacyCompat }),
        new RestTransportFactory({ fetchImpl, legacyCompat }),
      ],
    });
  }

  /** The client of the agent as registered now (a re-registered card gets a new client). */
  clientFor(agent: StoredAgent): Promise<Client> {
    const key = `${agent.tenant}\u0000${agent.name}`;
    const updatedAt = agent.updatedAt.getTime();
    const cached = this.clients.get(key);
    if (cached && cached.updatedAt === updatedAt) return cached.client;
    const client = this.factory.createFromAgentCard(AgentCard.fromJSON(agent.card));
    // A failed build is not cached: the next call tries again.
    client.catch(() => this.clients.delete(key));
    this.clients.set(key, { updatedAt, client });
    return client;
  }

  /** Drops the agent's client (it was removed). */
  forget(tenant: string, name: string): void {
    this.clients.delete(`${tenant}\u0000${name}`);
  }

  /** Options of one call to an agent: its deadline. */
  callOptions(): { signal: AbortSignal } {
    return { signal: AbortSignal.timeout(this.timeoutMs) };
  }
}

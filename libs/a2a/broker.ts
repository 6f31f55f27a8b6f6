import type { DataSource } from 'typeorm';
import type { Agent as UndiciAgent } from 'undici';
import { ErrorCode, EventMeshError } from '../errors';
import { createLogger } from '../logging';
import { AGENT_NAME, GateAuthentication, meshCardOf, RegisteredCard, validateAgentCard, validateAgentName } from './agent-card';
import { AgentClients } from './agent-clients';
import { A2AAgentStore, AgentFilter, StoredAgent } from './agent-store';
import { MeshTaskHandler } from './mesh-task-handler';
import { A2ATaskStore } from './task-store';

/** An agent as the registry API shows it. */
export interface AgentView {
  name: string;
  card: RegisteredCard;
  createdAt: string;
  updatedAt: string;
}

const viewOf = (agent: StoredAgent): AgentView => ({ name: agent.name, card: agent.card, createdAt: agent.createdAt.toISOString(), updatedAt: agent.updatedAt.toISOString() });

/** How long close() waits for relays a non-blocking send left running. */
const CLOSE_WAIT_MS = 5_000;

/**
 * The A2A broker of a gateway (docs/a2a.md): the agents registry (tenant-scoped), the card the mesh serves for each
 * agent, and the per-agent request handler behind the JSON-RPC endpoint. Relays a non-blocking send leaves running
 * are tracked here, and awaited (bounded) on close.
 */
export class A2ABroker {
  private readonly log = createLogger('A2ABroker');
  readonly agents: A2AAgentStore;
  readonly tasks: A2ATaskStore;
  private readonly running = new Set<Promise<unknown>>();

  constructor(
    db: DataSource,
    private readonly clients: AgentClients,
    /** Checks an agent URL against the sink rules (the SSRF guard of webhook sinks), refusing with a 400. */
    private readonly checkUrl: (url: string) => Promise<void>,
  ) {
    this.agents = new A2AAgentStore(db);
    this.tasks = new A2ATaskStore(db);
  }

  static create(db: DataSource, sinks: { check(url: string): Promise<void>; agent(): UndiciAgent }, callTimeoutMs: number): A2ABroker {
    return new A2ABroker(db, new AgentClients(sinks.agent(), callTimeoutMs), (url) => sinks.check(url));
  }

  async register(tenant: string, name: string, body: unknown): Promise<{ agent: AgentView; created: boolean }> {
    validateAgentName(name);
    const card = validateAgentCard(body);
    for (const i of card.supportedInterfaces) await this.checkUrl(i.url);
    const { agent, created } = await this.agents.put(tenant, name, card);
    return { agent: viewOf(agent), created };
  }

  async get(tenant: string, name: string): Promise<AgentView> {
    return viewOf(await this.agent(tenant, name));
  }

  async list(tenant: string, filter: AgentFilter): Promise<AgentView[]> {
    return (await this.agents.list(tenant, filter)).map(viewOf);
  }

  async remove(tenant: string, name: string): Promise<void> {
    if (!(await this.agents.delete(tenant, name))) throw notFound(name);
    this.clients.forget(tenant, name);
  }

  /** The tenant's agent by name, or a 404 `AGENT_NOT_FOUND` (the same for another tenant's). */
  async agent(tenant: string, name: string): Promise<StoredAgent> {
    const agent = AGENT_NAME.test(name) ? await this.agents.get(tenant, name) : undefined;
    if (!agent) throw notFound(name);
    return agent;
  }

  /** The card served for the agent, its interfaces at the mesh's endpoints. */
  cardOf(agent: StoredAgent, urls: { rpcUrl: string; restUrl: string }, gate: GateAuthentication): Record<string, unknown> {
    return meshCardOf(agent.card, urls, gate);
  }

  /** The request handler of one call to the agent's endpoint, for the caller's tenant. */
  handlerFor(tenant: string, agent: StoredAgent, card: Record<string, unknown>): MeshTaskHandler {
    return new MeshTaskHandler({ tenant, agent, card, tasks: this.tasks, clients: this.clients, background: (work) => this.track(work) });
  }

  async close(): Promise<void> {
    if (this.running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)));
    await Promise.race([Promise.allSettled([...this.running]), deadline]);
    clearTimeout(timer);
    if (this.running.size > 0) this.log.warn({ running: this.running.size }, 'closed with agent calls still running; their tasks stay as recorded');
  }

  private track(work: Promise<unknown>): void {
    const tracked = work.catch((e: unknown) => this.log.error({ err: e }, 'a background relay failed'));
    this.running.add(tracked);
    void tracked.finally(() => this.running.delete(tracked));
  }
}

function notFound(name: string): EventMeshError {
  return new EventMeshError(ErrorCode.AgentNotFound, `no agent ${name}`);
}

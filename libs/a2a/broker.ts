import type { Client as TemporalClient } from '@temporalio/client';
import type { DataSource } from 'typeorm';
import type { Agent as UndiciAgent } from 'undici';
import type { EventMeshConfig } from '../config';
import { ErrorCode, EventMeshError } from '../errors';
import type { EventFrame } from '../frame';
import type { PublishReceipt } from '../kafka';
import { AGENT_NAME, GateAuthentication, meshCardOf, RegisteredCard, validateAgentCard, validateAgentName } from './agent-card';
import { AgentClients } from './agent-clients';
import { A2AAgentStore, AgentFilter, StoredAgent } from './agent-store';
import { MeshTaskHandler } from './mesh-task-handler';
import { requestTopicOf } from './request-topic';
import { TaskRelay } from './task-relay';
import { A2ATaskStore } from './task-store';
import { TaskWorkflows } from './task-workflows';

/** An agent as the registry API shows it. */
export interface AgentView {
  name: string;
  card: RegisteredCard;
  createdAt: string;
  updatedAt: string;
}

const viewOf = (agent: StoredAgent): AgentView => ({ name: agent.name, card: agent.card, createdAt: agent.createdAt.toISOString(), updatedAt: agent.updatedAt.toISOString() });

/** What the broker writes tasks to and makes topics with (the gateway's Kafka producer and topic admin). */
export interface BrokerKafka {
  publish(topic: string, frame: EventFrame): Promise<PublishReceipt>;
  ensureTopic(topic: string): Promise<unknown>;
}

/**
 * The A2A broker of a gateway (docs/a2a.md): the agents registry (tenant-scoped; registering an agent creates its
 * request topic), the card the mesh serves for each agent, and the per-agent request handler behind its endpoints.
 * Tasks are run by their workflows (task-workflows.ts), on whichever instance's worker.
 */
export class A2ABroker {
  readonly agents: A2AAgentStore;
  readonly tasks: A2ATaskStore;
  private readonly relay: TaskRelay;

  constructor(
    db: DataSource,
    private readonly clients: AgentClients,
    /** Checks an agent URL against the sink rules (the SSRF guard of webhook sinks), refusing with a 400. */
    private readonly checkUrl: (url: string) => Promise<void>,
    private readonly kafka: BrokerKafka,
    private readonly workflows: TaskWorkflows,
    private readonly sendWaitMs: number,
  ) {
    this.agents = new A2AAgentStore(db);
    this.tasks = new A2ATaskStore(db);
    this.relay = new TaskRelay(this.tasks, this.agents, clients);
  }

  static create(
    db: DataSource,
    sinks: { check(url: string): Promise<void>; agent(): UndiciAgent },
    agents: EventMeshConfig['agents'],
    kafka: BrokerKafka,
    temporal: TemporalClient,
  ): A2ABroker {
    const workflows = new TaskWorkflows(temporal, { timeoutMs: agents.taskTimeoutMs, callTimeoutMs: agents.callTimeoutMs });
    return new A2ABroker(db, new AgentClients(sinks.agent(), agents.callTimeoutMs), (url) => sinks.check(url), kafka, workflows, agents.sendWaitMs);
  }

  async register(tenant: string, name: string, body: unknown): Promise<{ agent: AgentView; created: boolean }> {
    validateAgentName(name);
    const card = validateAgentCard(body);
    for (const i of card.supportedInterfaces) await this.checkUrl(i.url);
    // The topic first: an agent is registered only once its tasks have somewhere to travel.
    await this.kafka.ensureTopic(requestTopicOf(tenant, name));
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
    return new MeshTaskHandler({
      tenant,
      agent,
      card,
      tasks: this.tasks,
      workflows: this.workflows,
      relay: this.relay,
      publish: (topic, frame) => this.kafka.publish(topic, frame),
      sendWaitMs: this.sendWaitMs,
    });
  }
}

function notFound(name: string): EventMeshError {
  return new EventMeshError(ErrorCode.AgentNotFound, `no agent ${name}`);
}

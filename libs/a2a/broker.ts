import type { Client as TemporalClient } from '@temporalio/client';
import type { DataSource } from 'typeorm';
import type { Agent as UndiciAgent } from 'undici';
import type { EventMeshConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { EventFrame } from '@libs/frame';
import type { PublishReceipt } from '@libs/kafka';
import { createLogger } from '@libs/logging';
import {
  AGENT_NAME,
  GateAuthentication,
  meshCardOf,
  RegisteredCard,
  validateAgentCard,
  validateAgentName,
} from './agents/agent-card';
import { AgentClients } from './relay/agent-clients';
import { applyAgentUpdate, parseAgentUpdate } from './tasks/agent-updates';
import { A2AAgentStore, AGENT_STYLES, AgentFilter, AgentStyle, StoredAgent } from './agents/agent-store';
import { MeshTaskHandler } from './protocol/mesh-task-handler';
import { PushConfigStore } from './push/push-configs';
import type { SecretBox } from '@libs/security';
import { eventsTopicOf, requestTopicOf } from './relay/request-topic';
import { TaskEventPublisher } from './tasks/task-event-publisher';
import { A2ATaskStore } from './tasks/task-store';
import { TaskStreams } from './tasks/task-stream';
import { LocalA2AWorker, TaskWorkflows } from './temporal/task-workflows';

/** An agent as the registry API shows it. */
export interface AgentView {
  name: string;
  card: RegisteredCard;
  style: AgentStyle;
  /** A subscriber's last heartbeat. */
  heartbeatAt?: string;
  /** Its registration, counted from 1 (each PUT takes the next): a subscriber's replicas name it in their heartbeats. */
  registration: number;
  createdAt: string;
  updatedAt: string;
}

const viewOf = (agent: StoredAgent): AgentView => ({
  name: agent.name,
  card: agent.card,
  style: agent.style,
  ...(agent.heartbeatAt ? { heartbeatAt: agent.heartbeatAt.toISOString() } : {}),
  registration: agent.registration,
  createdAt: agent.createdAt.toISOString(),
  updatedAt: agent.updatedAt.toISOString(),
});

/** What the broker writes tasks to and makes topics with (the gateway's Kafka producer and topic admin). */
export interface BrokerKafka {
  publish(topic: string, frame: EventFrame): Promise<PublishReceipt>;
  publishAll(topic: string, frames: EventFrame[]): Promise<unknown>;
  ensureTopic(topic: string): Promise<unknown>;
  /** Deletes every event of a topic, keeping the topic (TopicAdmin.emptyTopic says why). */
  emptyTopic(topic: string): Promise<unknown>;
}

/**
 * The A2A broker of a gateway (docs/a2a.md): the agents registry (tenant-scoped; registering an agent creates its
 * request topic), the card the mesh serves for each agent, and the per-agent request handler behind its endpoints.
 * Tasks are run by their workflows (task-workflows.ts), on whichever instance's worker.
 */
export class A2ABroker {
  private readonly log = createLogger('A2ABroker');
  readonly agents: A2AAgentStore;
  readonly tasks: A2ATaskStore;
  /** The gateway's SSE streams of task logs. */
  readonly streams: TaskStreams;
  /** How long an idle stream waits before a keep-alive comment (EVENTMESH_AGENTS_STREAM_HEARTBEAT_MS). */
  readonly streamHeartbeatMs: number;
  private readonly maxAgentsPerTenant: number;
  readonly pushConfigs: PushConfigStore;
  /** Copies the task events this gateway commits to the agents' events topics, when no worker of this process does. */
  private readonly ownEvents: TaskEventPublisher | undefined;

  constructor(
    db: DataSource,
    private readonly clients: AgentClients,
    /** Checks an agent URL against the sink rules (the SSRF guard of webhook sinks), refusing with a 400. */
    private readonly checkUrl: (url: string) => Promise<void>,
    private readonly kafka: BrokerKafka,
    private readonly workflows: TaskWorkflows,
    private readonly sendWaitMs: number,
    /** How long a subscriber agent's card lives after its last heartbeat (EVENTMESH_AGENTS_HEARTBEAT_TTL_MS). */
    private readonly heartbeatTtlMs: number,
    /**
     * The bounds of the task streams (EVENTMESH_AGENTS_MAX_STREAMS, EVENTMESH_AGENTS_STREAM_POLL_MS) and of a tenant's
     * agents (EVENTMESH_AGENTS_MAX_PER_TENANT).
     */
    streams: { maxStreams: number; streamPollMs: number; streamHeartbeatMs: number; maxPerTenant: number },
    /** Seals the push configs' tokens and credentials at rest. */
    secrets: SecretBox,
  ) {
    this.streamHeartbeatMs = streams.streamHeartbeatMs;
    this.maxAgentsPerTenant = streams.maxPerTenant;
    this.agents = new A2AAgentStore(db);
    // The changes this gateway commits (a task taken, a subscriber agent's update) go to the events topics through
    // the publisher of this process's worker when it runs one (one run per task for both), else its own.
    const local = workflows.localEvents();
    this.ownEvents = local ? undefined : new TaskEventPublisher(db, kafka);
    const events = (local ?? this.ownEvents)!;
    this.tasks = new A2ATaskStore(db, (task) => events.changed(task));
    this.streams = new TaskStreams(db, { maxStreams: streams.maxStreams, pollMs: streams.streamPollMs });
    this.pushConfigs = new PushConfigStore(db, secrets);
  }

  static create(
    db: DataSource,
    sinks: { check(url: string): Promise<void>; agent(): UndiciAgent },
    agents: EventMeshConfig['agents'],
    kafka: BrokerKafka,
    /** The client that starts and steers task workflows; `worker`: the process's own A2A worker, if it runs one. */
    temporal: { client: TemporalClient; worker?: LocalA2AWorker },
    /** The box of the instance's secrets at rest: push configs' tokens and credentials are sealed with it. */
    secrets: SecretBox,
  ): A2ABroker {
    const workflows = new TaskWorkflows(temporal.client, {
      timeoutMs: agents.taskTimeoutMs,
      callTimeoutMs: agents.callTimeoutMs,
      worker: temporal.worker,
    });
    return new A2ABroker(
      db,
      new AgentClients(sinks.agent(), agents.callTimeoutMs, agents.maxAnswerBytes),
      (url) => sinks.check(url),
      kafka,
      workflows,
      agents.sendWaitMs,
      agents.heartbeatTtlMs,
      agents,
      secrets,
    );
  }

  /** The task workflows this process started, and how many of them the server started eagerly on its own worker. */
  workflowStarts(): { total: number; eager: number } {
    return { ...this.workflows.starts };
  }

  /** The first attempts this gateway began for its process's worker, and those the worker's local activities adopted. */
  firstAttempts(): { begun: number; adopted: number; refused: number; held: number } | undefined {
    return this.workflows.firstAttempts();
  }

  /** The requests this gateway handed to its process's worker instead of Kafka, and those the deliveries took. */
  requestHandoff(): { handed: number; taken: number; held: number } | undefined {
    return this.workflows.requestHandoff();
  }

  /** Ends the open task streams, and waits for the task events being published (the gateway closes). */
  async close(): Promise<void> {
    this.streams.close();
    await this.ownEvents?.close();
  }

  /** Registers an agent of a style (`url` when absent; a 400 naming the legal values otherwise). */
  async register(
    tenant: string,
    name: string,
    body: unknown,
    style: string = 'url',
  ): Promise<{ agent: AgentView; created: boolean }> {
    validateAgentName(name);
    if (!(AGENT_STYLES as readonly string[]).includes(style)) {
      throw new EventMeshError(ErrorCode.InvalidRequest, `style: one of ${AGENT_STYLES.join(', ')}`, {
        field: 'style',
      });
    }
    const card = validateAgentCard(body, style as AgentStyle);
    // Its task policy (a card extension) is checked now, so a card stored is one every send can apply.
    this.workflows.policyOf(card);
    if (style === 'url') for (const i of card.supportedInterfaces) await this.checkUrl(i.url);
    // Within the tenant's cap before its topics are made (the put checks again, atomically).
    if (!(await this.agents.fits(tenant, name, this.maxAgentsPerTenant))) throw this.agentLimit();
    // The topic first: an agent is registered only once its tasks have somewhere to travel.
    await this.kafka.ensureTopic(requestTopicOf(tenant, name));
    await this.kafka.ensureTopic(eventsTopicOf(tenant, name));
    const stored = await this.agents.put(tenant, name, card, style as AgentStyle, this.maxAgentsPerTenant);
    if (!stored) throw this.agentLimit();
    return { agent: viewOf(stored.agent), created: stored.created };
  }

  private agentLimit(): EventMeshError {
    const max = this.maxAgentsPerTenant;
    return new EventMeshError(
      ErrorCode.AgentLimitReached,
      `the tenant has ${max} agents, its most (EVENTMESH_AGENTS_MAX_PER_TENANT); remove one first`,
      { maxAgentsPerTenant: max },
    );
  }

  async get(tenant: string, name: string): Promise<AgentView> {
    return viewOf(await this.agent(tenant, name));
  }

  /** The tenant's agents; a subscriber whose card expired (no heartbeat within the TTL) is not listed. */
  async list(tenant: string, filter: AgentFilter): Promise<AgentView[]> {
    return (await this.agents.list(tenant, filter)).filter((a) => this.live(a)).map(viewOf);
  }

  /**
   * A subscriber agent's liveness heartbeat: its card lives on for the TTL. 404 for an agent of another style; 409
   * `STALE_REGISTRATION` (nothing written) for one naming a registration the agent's PUT replaced.
   */
  async heartbeat(tenant: string, name: string, registration?: number): Promise<void> {
    const beat = AGENT_NAME.test(name) ? await this.agents.heartbeat(tenant, name, registration) : 'unknown';
    if (beat === 'unknown') throw notFound(name);
    if (beat === 'stale')
      throw new EventMeshError(
        ErrorCode.StaleRegistration,
        `agent ${name} is not at registration ${registration} (it was registered again): this heartbeat is refused`,
      );
  }

  /**
   * A mesh-subscriber agent's update of one of its tasks, recorded (compare-and-set), then told to the task's
   * workflow (which ends when the task settles). Answers the task's state and version.
   */
  async update(
    tenant: string,
    name: string,
    taskId: string,
    body: unknown,
  ): Promise<{ taskId: string; state: string; version: number }> {
    const agent = await this.agent(tenant, name);
    const update = parseAgentUpdate(body);
    const task = await applyAgentUpdate(this.tasks, tenant, agent.name, taskId, update);
    // The update is recorded: a workflow that does not hear of it (Temporal unreachable) still ends, at the task's
    // timeout at the latest, with the state recorded.
    await this.workflows
      .changed(task.id, task.state, task.version)
      .catch((e: unknown) =>
        this.log.warn(
          { agent: agent.name, task: task.id, error: (e as Error).message },
          'could not tell the task workflow of an update',
        ),
      );
    return { taskId: task.id, state: task.state, version: task.version };
  }

  /** An agent at a URL always; a subscriber while its last heartbeat is within the TTL. */
  private live(agent: StoredAgent): boolean {
    return (
      agent.style === 'url' ||
      (agent.heartbeatAt !== null && Date.now() - agent.heartbeatAt.getTime() <= this.heartbeatTtlMs)
    );
  }

  /**
   * Removes the agent, then its topics' events (the request topic's tasks not yet taken, the events topic's log), as
   * `DELETE /topics/{name}` removes a tenant topic's: the registration goes first, so no send writes after the
   * topics are emptied, and subscribing to its topics is 404 from then on. The Kafka topics stay, empty; a
   * registration of that name again takes them up. A Kafka failure is 503 with the agent already removed.
   */
  async remove(tenant: string, name: string): Promise<void> {
    if (!(await this.agents.delete(tenant, name))) throw notFound(name);
    this.clients.forget(tenant, name);
    for (const topic of [requestTopicOf(tenant, name), eventsTopicOf(tenant, name)]) {
      await this.kafka.emptyTopic(topic).catch((e: unknown) => {
        throw new EventMeshError(
          ErrorCode.KafkaUnavailable,
          `agent "${name}" removed, but the events of its topic ${topic} were not deleted: ${(e as Error).message}`,
          { agent: name, topic },
          true,
        );
      });
    }
  }

  /**
   * The tenant's agent by name, or a 404 `AGENT_NOT_FOUND` (the same for another tenant's, and for a subscriber whose
   * card expired: its card is not served and it is sent no task until it beats again).
   */
  async agent(tenant: string, name: string): Promise<StoredAgent> {
    const agent = AGENT_NAME.test(name) ? await this.agents.get(tenant, name) : undefined;
    if (!agent || !this.live(agent)) throw notFound(name);
    return agent;
  }

  /** The card served for the agent, its interfaces at the mesh's endpoints. */
  cardOf(
    agent: StoredAgent,
    urls: { rpcUrl: string; restUrl: string },
    gate: GateAuthentication,
  ): Record<string, unknown> {
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
      publish: (topic, frame) => this.kafka.publish(topic, frame),
      sendWaitMs: this.sendWaitMs,
      streams: this.streams,
      pushConfigs: this.pushConfigs,
      checkUrl: this.checkUrl,
    });
  }
}

function notFound(name: string): EventMeshError {
  return new EventMeshError(ErrorCode.AgentNotFound, `no agent ${name}`);
}

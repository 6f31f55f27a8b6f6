import { orderingOf } from '@libs/delivery';
import { randomBytes, randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { DeliveryTopology, EventMeshConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { compileFilters } from '@libs/filter';
import {
  agentOfTopic,
  clientTopicNameOf,
  isAgentTopic,
  isAgentTopicOf,
  isTenantTopic,
  type TopicAdmin,
} from '@libs/kafka';
import { createLogger } from '@libs/logging';
import { Caller, SecretBox, SinkGuard } from '@libs/security';
import { A2AAgentRows, SubscriptionEntity, SubscriptionStore } from '@libs/storage';
import { TopicNamespace } from '@libs/topics';
import { CreateSubscriptionRequest, createSubscriptionSchema, SubscriptionView } from './subscription.schema';
import { validateWebhookTarget } from './webhook-handshake';

/**
 * The subscriptions resource. A subscription's start position is resolved to concrete offsets when it is
 * created, in the same transaction, so no event published after the create answered is ever skipped, however
 * late the dispatch loop picks the subscription up.
 *
 * Tenancy: a subscription belongs to the tenant of the caller that created it. Every read and write of the
 * resource names the caller's tenant, and a subscription of another tenant is answered exactly as one that does
 * not exist (404 SUBSCRIPTION_NOT_FOUND, same body): existence does not leak across tenants. The dispatch side
 * (activeFor, activeOnTopic, disable) and the operator's admin routes are runtime-wide.
 */
export class SubscriptionService {
  private readonly log = createLogger('SubscriptionService');
  /** Topics of subscriptions by `tenant/id` (topicFor). */
  private readonly topics_ = new Map<string, string>();
  private readonly rows: SubscriptionStore;
  private readonly agents: A2AAgentRows<unknown>;

  constructor(
    db: DataSource,
    private readonly topics: TopicAdmin,
    private readonly options: {
      instanceId: string;
      defaultTopic: string;
      webhookOrigin: string;
      webhookTimeoutMs: number;
      topology?: DeliveryTopology;
      /** Seals the webhook signing secrets at rest. */
      secrets: SecretBox;
      /** The SSRF guard: a sink is checked before the validation handshake sends anything. */
      sinks: SinkGuard;
      /** EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT: only its admins may skip the validation handshake (`config.trusted`). */
      operatorTenant: string;
      /** Which Kafka topic a topic name means for the caller's tenant (libs/topics). */
      namespace: TopicNamespace;
    },
  ) {
    this.rows = new SubscriptionStore(db);
    this.agents = new A2AAgentRows(db);
  }

  /** The instance whose subscriptions this service creates (and whose stream clients it serves). */
  get instanceId(): string {
    return this.options.instanceId;
  }

  /** The service as an instance runs it, from its configuration. */
  static forInstance(
    db: DataSource,
    topics: TopicAdmin,
    config: EventMeshConfig,
    sinks: SinkGuard = SinkGuard.fromConfig(config),
  ): SubscriptionService {
    return new SubscriptionService(db, topics, {
      instanceId: config.instance.id,
      defaultTopic: config.kafka.topics[0],
      webhookOrigin: config.delivery.webhookOrigin,
      webhookTimeoutMs: config.delivery.webhookTimeoutMs,
      topology: config.delivery.topology,
      secrets: SecretBox.fromConfig(config),
      sinks,
      operatorTenant: config.admin.security.operatorTenant,
      namespace: TopicNamespace.fromConfig(db, topics, config),
    });
  }

  /**
   * An A2A agent's topic (libs/a2a/relay/request-topic.ts) is served while the agent is registered, and only to its own
   * tenant: another tenant's, or one of no agent registered now (never, or removed), is an unknown topic.
   */
  private async checkAgentTopic(topic: string, tenant: string): Promise<void> {
    if (!isAgentTopic(topic)) return;
    const known =
      isAgentTopicOf(topic, tenant) &&
      (await this.agents.exists(tenant, agentOfTopic(topic)!)) &&
      (await this.topics.partitionsOf(topic).then(
        (p) => p.length > 0,
        () => false,
      ));
    if (!known)
      throw new EventMeshError(ErrorCode.UnknownTopic, `topic "${topic}" is not served by this runtime`, { topic });
  }

  /** Parses and checks a create or replace request: schema, filters. Nothing is written. */
  parse(body: unknown): CreateSubscriptionRequest & { topic: string } {
    const parsed = createSubscriptionSchema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new EventMeshError(ErrorCode.InvalidRequest, `${issue.path.join('.') || 'body'}: ${issue.message}`, {
        field: issue.path.join('.'),
        issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
      });
    }
    const request = parsed.data;
    // A bad filter is refused here, with its path, never met at dispatch time.
    compileFilters(request.filters);
    return { ...request, topic: request.topic ?? this.options.defaultTopic };
  }

  /**
   * `config.trusted` skips the validation handshake, the sink's consent to be sent events: only an admin of the
   * operator tenant may set it, or a tenant could aim the runtime's deliveries at any server that does not want
   * them. Refused with 403 before anything is checked, sent or written.
   */
  private checkTrusted(request: CreateSubscriptionRequest, caller: SubscriptionCaller, kept = false): void {
    if (request.config.trusted !== true || kept) return;
    if (caller.tenant === this.options.operatorTenant && caller.scopes.includes('admin')) return;
    throw new EventMeshError(
      ErrorCode.Forbidden,
      'config.trusted: only an admin of the operator tenant may skip the webhook validation handshake',
      {
        field: 'config.trusted',
        reason: 'operator_only',
      },
    );
  }

  /** Creates a subscription owned by the caller's tenant. */
  async create(body: unknown, caller: SubscriptionCaller): Promise<SubscriptionView> {
    const tenant = caller.tenant;
    const request = this.parse(body);
    this.checkTrusted(request, caller);
    // The Kafka topic the name means for the tenant: the subscription reads (and stores) that one.
    const topic = await this.options.namespace.resolve(tenant, request.topic, 'subscribe');
    await this.checkAgentTopic(topic, tenant);
    // Before the handshake: a name taken sends nothing to the sink.
    if (request.name !== undefined) await this.checkNameFree(request.name, tenant);
    if (request.protocol === 'HTTP') await this.checkSink(request.sink!, request.config.trusted === true);
    const startFrom = request.config.startFrom;
    const starts =
      startFrom === 'latest'
        ? await this.topics.endOffsets(topic)
        : startFrom === 'earliest'
          ? await this.topics.startOffsets(topic)
          : await this.topics.offsetsAt(topic, Date.parse(startFrom));

    const id = randomUUID();
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    await this.rows
      .create(
        {
          id,
          tenant,
          name: request.name ?? null,
          topic,
          protocol: request.protocol,
          sink: request.sink ?? '',
          filters: request.filters as object[],
          config: request.config,
          signingSecret: request.protocol === 'HTTP' ? this.options.secrets.seal(secret) : null,
          instanceId: this.options.instanceId,
          status: 'ACTIVE',
        },
        starts,
      )
      .catch(async (e: unknown) => {
        // Two creates of one name at once: the unique index lets one through.
        if (request.name !== undefined && isNameConflict(e)) await this.checkNameFree(request.name, tenant);
        throw e;
      });
    this.log.info(
      {
        subscription: id,
        name: request.name,
        tenant,
        topic,
        protocol: request.protocol,
        sink: request.sink,
        startFrom,
      },
      'subscription created',
    );
    return request.protocol === 'HTTP' ? { ...(await this.get(id, tenant)), secret } : this.get(id, tenant);
  }

  /**
   * The topic of a subscription as `tenant` sees it, for the gate's ACL; undefined when it has none by that id. A
   * subscription's topic never changes, so an answer is remembered (a bounded number of them).
   */
  async topicFor(id: string, tenant: string): Promise<string | undefined> {
    const key = `${tenant}/${id}`;
    const known = this.topics_.get(key);
    if (known !== undefined) return known;
    if (!isUuid(id)) return undefined;
    const topic = await this.rows.topicOf(id, tenant);
    if (topic === undefined) return undefined;
    const name = clientTopicNameOf(topic);
    if (this.topics_.size >= TOPIC_MEMORY) this.topics_.delete(this.topics_.keys().next().value!);
    this.topics_.set(key, name);
    return name;
  }

  /** The subscription of `tenant` named `name`, if it has one. */
  async findByName(name: string, tenant: string): Promise<SubscriptionView | undefined> {
    const row = await this.rows.byName(name, tenant);
    return row ? view(row) : undefined;
  }

  /** 409 SUBSCRIPTION_NAME_TAKEN, naming the holder's id, when `tenant` has a subscription named `name`. */
  private async checkNameFree(name: string, tenant: string): Promise<void> {
    const holder = await this.findByName(name, tenant);
    if (holder) throw subscriptionNameTaken(name, holder.id);
  }

  /** A subscription of `tenant`; 404 SUBSCRIPTION_NOT_FOUND when that tenant has none by this id. */
  async get(id: string, tenant: string): Promise<SubscriptionView> {
    return view(await this.row(id, tenant));
  }

  private async row(id: string, tenant: string): Promise<SubscriptionEntity> {
    const row = isUuid(id) ? await this.rows.get(id, tenant) : null;
    if (!row) throw subscriptionNotFound(id);
    return row;
  }

  /**
   * Replaces a subscription's sink, filters and config (PUT). Its topic and start position belong to its offsets
   * and cannot change; a new sink is validated like a new subscription's. The dispatch loop picks the change up
   * at its next refresh (within a second); the signing secret stays.
   */
  async replace(id: string, body: unknown, caller: SubscriptionCaller): Promise<SubscriptionView> {
    const tenant = caller.tenant;
    const current = await this.row(id, tenant);
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new EventMeshError(
        ErrorCode.InvalidRequest,
        'body: expected a JSON object, the subscription as it is to be',
        { field: 'body' },
      );
    }
    const request = this.parse({ topic: clientTopicNameOf(current.topic), protocol: current.protocol, ...body });
    if (request.topic !== clientTopicNameOf(current.topic)) {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'topic: a subscription cannot move to another topic', {
        field: 'topic',
      });
    }
    const fixedStart = String(current.config.startFrom ?? 'latest');
    const askedStart = (body as { config?: { startFrom?: unknown } } | null)?.config?.startFrom;
    if (askedStart !== undefined && askedStart !== fixedStart) {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'config.startFrom: the start position is fixed at create', {
        field: 'config.startFrom',
      });
    }
    if (request.name !== undefined && request.name !== current.name) {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'name: a subscription keeps the name it was created with', {
        field: 'name',
      });
    }
    if (request.protocol !== current.protocol) {
      throw new EventMeshError(ErrorCode.InvalidRequest, 'protocol: a subscription keeps its protocol', {
        field: 'protocol',
      });
    }
    // A tenant may keep the trust an operator gave its subscription, for the sink the operator trusted only.
    this.checkTrusted(request, caller, current.config.trusted === true && request.sink === current.sink);
    if (request.protocol === 'HTTP')
      await this.checkSink(request.sink!, request.sink === current.sink || request.config.trusted === true);
    const replaced = await this.rows.replace(id, tenant, {
      sink: request.sink ?? '',
      // A write seals the secret again with the active key (key rotation).
      ...(current.signingSecret ? { signingSecret: this.resealed(current.signingSecret) } : {}),
      filters: request.filters as object[],
      config: { ...request.config, startFrom: fixedStart },
    });
    // Deleted while the new sink was being validated.
    if (!replaced) throw subscriptionNotFound(id);
    this.log.info({ subscription: id, tenant, sink: request.sink }, 'subscription replaced');
    return this.get(id, tenant);
  }

  /**
   * The SSRF guard on a webhook sink (every address its host resolves to), then, unless `skipHandshake`, the
   * validation handshake, through a connection pinned to a checked address. A refused sink gets no request.
   */
  private async checkSink(sink: string, skipHandshake: boolean): Promise<void> {
    await this.options.sinks.check(sink);
    if (skipHandshake) return;
    const agent = this.options.sinks.agent();
    try {
      await validateWebhookTarget(sink, this.options.webhookOrigin, this.options.webhookTimeoutMs, agent);
    } finally {
      await agent.destroy();
    }
  }

  /** A stored signing secret sealed with the active key (a secret stored in the clear by an earlier version, sealed). */
  private resealed(stored: string): string {
    return SecretBox.isSealed(stored) ? this.options.secrets.reseal(stored) : this.options.secrets.seal(stored);
  }

  /** The subscriptions of `tenant`, oldest first; only the one named `name` when given. */
  async list(tenant: string, name?: string): Promise<SubscriptionView[]> {
    return (await this.rows.list(tenant, name)).map(view);
  }

  /** Deletes a subscription of `tenant`; 404 SUBSCRIPTION_NOT_FOUND when that tenant has none by this id. */
  async delete(id: string, tenant: string): Promise<void> {
    if (!(isUuid(id) && (await this.rows.delete(id, tenant)))) throw subscriptionNotFound(id);
    this.log.info({ subscription: id, tenant }, 'subscription deleted');
  }

  /** Stops delivery to a subscription (its sink answered 410 Gone); it stays readable, `status: DISABLED`. */
  /** In the caller's transaction when given one (a dispatch loop's fenced write). */
  async disable(id: string, reason: string, manager?: EntityManager): Promise<void> {
    await this.rows.disable(id, manager);
    this.log.warn({ subscription: id, reason }, 'subscription disabled');
  }

  /** Active subscriptions of a topic, webhook and stream, whichever instance created them (PARTITION_OWNED_PULL). */
  activeOnTopic(topic: string): Promise<SubscriptionEntity[]> {
    return this.rows.activeOnTopic(topic);
  }

  /**
   * The topics made at runtime that an active subscription reads, any tenant's: the A2A agents' topics (requests,
   * events: libs/a2a/relay/request-topic.ts) and the tenants' own topics (libs/kafka/runtime-topics.ts). In
   * PARTITION_OWNED_PULL their partitions are owned beside the configured topics' (apps/worker).
   */
  async subscribedRuntimeTopics(): Promise<string[]> {
    return (await this.rows.activeRuntimeTopicCandidates()).filter((t) => isAgentTopic(t) || isTenantTopic(t));
  }

  /** Active subscriptions this instance dispatches (LOCAL_STICKY_PULL). */
  activeFor(instanceId: string): Promise<SubscriptionEntity[]> {
    return this.rows.activeFor(instanceId);
  }
}

/** Who creates or replaces a subscription: its tenant owns it, its scopes say whether it may set `config.trusted`. */
export type SubscriptionCaller = Pick<Caller, 'tenant' | 'scopes'>;

const TOPIC_MEMORY = 10000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Whether `s` has the shape of a subscription id (anything else is answered as not found without a query). */
export const isUuid = (s: string) => UUID.test(s);

/** The one answer for a subscription the caller's tenant has not: missing and another tenant's read the same. */
export function subscriptionNotFound(id: string): EventMeshError {
  return new EventMeshError(ErrorCode.SubscriptionNotFound, `subscription ${id} does not exist`, { id });
}

/** 409: the name is the tenant's other subscription's (`id`). */
export function subscriptionNameTaken(name: string, id: string): EventMeshError {
  return new EventMeshError(ErrorCode.SubscriptionNameTaken, `subscription name "${name}" is taken`, {
    field: 'name',
    name,
    id,
  });
}

/** A write the unique index on (tenant, name) refused. */
function isNameConflict(e: unknown): boolean {
  return (e as { driverError?: { constraint?: string } }).driverError?.constraint === 'subscriptions_tenant_name_key';
}

/** A config as a subscription's view shows it: an HTTP one's with its ordering, the default included. */
export function configView(protocol: string, config: Record<string, unknown>): Record<string, unknown> {
  return protocol === 'HTTP' ? { ...config, ordering: orderingOf({ protocol, config } as SubscriptionEntity) } : config;
}

function view(row: SubscriptionEntity): SubscriptionView {
  return {
    id: row.id,
    ...(row.name !== null ? { name: row.name } : {}),
    topic: clientTopicNameOf(row.topic),
    protocol: row.protocol,
    ...(row.protocol === 'HTTP' ? { sink: row.sink } : {}),
    filters: row.filters,
    // A webhook subscription shows its ordering, the default included.
    config: configView(row.protocol, row.config),
    instance: row.instanceId,
    status: row.status,
    createdAt: row.createdAt.toISOString(),
  };
}

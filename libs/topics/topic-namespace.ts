import type { DataSource } from 'typeorm';
import { z } from 'zod';
import { TENANT_NAME, type EventMeshConfig, type SharedTopicAccess } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { isTenantTopic, TENANT_TOPIC_NAME, tenantTopicOf, type TopicAdmin } from '@libs/kafka';
import { createLogger } from '@libs/logging';
import {
  SubscriptionStore,
  TenantTopicEntity,
  TenantTopicStore,
  TopicGrantEntity,
  TopicGrantStore,
} from '@libs/storage';

/** A tenant's own topic as its admins see it: the short name, never the Kafka topic underneath. */
export interface TenantTopicView {
  name: string;
  partitions: number;
  /** How long Kafka keeps its events; null: the broker's default. */
  retentionMs: number | null;
  createdAt: string;
}

/** `POST /topics`: a name of the tenant's, its partitions (the configured default) and retention (the broker's). */
export const createTopicSchema = z
  .object({
    name: z
      .string()
      .regex(TENANT_TOPIC_NAME, '1 to 128 characters of [A-Za-z0-9_-], starting with a letter or digit')
      .describe("the topic's name, the tenant's own"),
    partitions: z.number().int().min(1).optional().describe('its partitions (EVENTMESH_KAFKA_TOPIC_PARTITIONS)'),
    retentionMs: z
      .number()
      .int()
      .min(60_000)
      .max(10 * 365 * 24 * 3_600_000)
      .optional()
      .describe("how long its events are kept, in ms (the broker's default)"),
  })
  .strict();

const partitionsChange = createTopicSchema.shape.partitions
  .unwrap()
  .describe('its partitions: as many as it has or more');
const retentionChange = createTopicSchema.shape.retentionMs.unwrap().describe('how long its events are kept, in ms');
/**
 * `PATCH /topics/{name}`: more partitions (never fewer: Kafka cannot lower them), another retention, or both. Two
 * shapes, so the API document states that one of the two is required (`anyOf`), as the route refuses `{}`.
 */
export const configureTopicSchema = z.union([
  z.object({ partitions: partitionsChange, retentionMs: retentionChange.optional() }).strict(),
  z.object({ partitions: partitionsChange.optional(), retentionMs: retentionChange }).strict(),
]);

/** What a caller does with a topic it names: the reserved topics are the runtime's to write. */
export type TopicUse = 'publish' | 'subscribe';

/** `POST /admin/topics/{topic}/grants`: the tenant, and what it may do with the shared topic. */
export const topicGrantSchema = z
  .object({
    tenant: z.string().regex(TENANT_NAME).describe('the tenant granted'),
    action: z.enum(['publish', 'subscribe']).describe('what it may do with the topic'),
  })
  .strict();

/** One grant of a shared topic, as the operator reads it. */
export interface TopicGrantView {
  topic: string;
  tenant: string;
  action: TopicUse;
  grantedBy: string;
  createdAt: string;
}

/**
 * Which Kafka topic a name means for a tenant, and each tenant's own topics (docs/security.md, topics).
 *
 * A tenant's names are its own: `orders` of tenant A is `tenant.A.orders` in Kafka, of tenant B `tenant.B.orders`,
 * and no name a tenant can give reaches another tenant's topic. The topics of `EVENTMESH_KAFKA_TOPICS` are the
 * operator's, shared by every tenant (as before topics had owners: with an open gate nothing changes); a tenant
 * cannot create a topic of the same name. The audit topic is written by the runtime only; the operator tenant reads
 * every record of it, another tenant its own only (the delivery filters them: libs/delivery/tenant-records.ts).
 */
export class TopicNamespace {
  private readonly log = createLogger('TopicNamespace');
  private readonly store: TenantTopicStore;
  private readonly grants: TopicGrantStore;
  private readonly subscriptions: SubscriptionStore;

  constructor(
    db: DataSource,
    private readonly topics: TopicAdmin,
    private readonly options: {
      operatorTenant: string;
      /** The topic the CloudEvents audit sink writes, when it is on. */
      auditTopic?: string;
      maxTopicsPerTenant: number;
      maxPartitions: number;
      defaultPartitions: number;
      /** OPEN: every tenant uses the shared topics; GRANTED: the operator tenant, and the tenants it granted. */
      sharedTopicAccess?: SharedTopicAccess;
    },
  ) {
    this.store = new TenantTopicStore(db);
    this.grants = new TopicGrantStore(db);
    this.subscriptions = new SubscriptionStore(db);
  }

  static fromConfig(db: DataSource, topics: TopicAdmin, config: EventMeshConfig): TopicNamespace {
    const audit = config.security.gate.audit;
    return new TopicNamespace(db, topics, {
      operatorTenant: config.admin.security.operatorTenant,
      auditTopic: audit.sink === 'CLOUDEVENTS' ? audit.topic : undefined,
      maxTopicsPerTenant: config.kafka.tenantTopicsMax,
      maxPartitions: config.kafka.tenantTopicMaxPartitions,
      defaultPartitions: Math.min(config.kafka.topicPartitions, config.kafka.tenantTopicMaxPartitions),
      sharedTopicAccess: config.kafka.sharedTopicAccess,
    });
  }

  /**
   * The Kafka topic `name` means for the tenant, to `use` it: a shared topic is itself (no I/O: the publish path
   * asks), an A2A agent's topic is itself for a subscription (its tenant is checked there) and never published to,
   * a tenant's own topic is its Kafka topic once made. Anything else is 404 UNKNOWN_TOPIC, as a topic that does not
   * exist: another tenant's topics do not leak. The audit topic: 403 for a publish; any tenant subscribes to it
   * (and is delivered its own records only). With GRANTED shared topics, another tenant's use of one without the
   * operator's grant is 403 (reason `no_grant`; one indexed read: the operator tenant's publishes make none).
   */
  async resolve(tenant: string, name: string, use: TopicUse): Promise<string> {
    if (name === this.options.auditTopic) {
      if (use === 'publish') throw reserved(name);
      return name;
    }
    if (this.topics.isConfigured(name)) {
      if (
        this.options.sharedTopicAccess === 'GRANTED' &&
        tenant !== this.options.operatorTenant &&
        !(await this.grants.has(name, tenant, use))
      )
        throw noGrant(name, use);
      return name;
    }
    // Served, neither shared nor a tenant's: an A2A agent's topic, made at its registration (libs/a2a/relay/request-topic.ts).
    if (use === 'subscribe' && this.topics.isServed(name) && !isTenantTopic(name)) return name;
    if (TENANT_TOPIC_NAME.test(name) && (await this.store.isReady(tenant, name))) return tenantTopicOf(tenant, name);
    throw unknownTopic(name);
  }

  /** Creates one of the tenant's own topics: its name, then its Kafka topic; 201 once both exist. */
  async create(tenant: string, body: unknown): Promise<TenantTopicView> {
    const { name, partitions = this.options.defaultPartitions, retentionMs } = parse(createTopicSchema, body);
    this.checkPartitions(partitions);
    if (this.topics.isConfigured(name) || name === this.options.auditTopic) {
      throw new EventMeshError(ErrorCode.TopicExists, `topic "${name}" is one of the operator's shared topics`, {
        name,
        reason: 'shared',
      });
    }
    const max = this.options.maxTopicsPerTenant;
    const spec = { tenant, name, partitions, retentionMs: retentionMs ?? null };
    const taken = await this.store.reserve(spec, max);
    if (taken === 'exists')
      throw new EventMeshError(ErrorCode.TopicExists, `the tenant has a topic "${name}" already`, { name });
    if (taken === 'limit') {
      throw new EventMeshError(
        ErrorCode.TopicLimitReached,
        `the tenant has ${max} topics, its most (EVENTMESH_KAFKA_TENANT_TOPICS_MAX); delete one first`,
        { maxTopicsPerTenant: max },
      );
    }
    let made: { partitions: number };
    try {
      made = await this.topics.createTopic(tenantTopicOf(tenant, name), partitions, retentionMs);
    } catch (e) {
      // The name goes back: nothing of the topic is left for a retry to stumble on.
      await this.store.remove(tenant, name);
      throw kafkaFailed('create', name, e);
    }
    await this.store.setReady(tenant, name, true, made.partitions);
    this.log.info({ tenant, topic: name, partitions, retentionMs }, 'tenant topic created');
    return viewOf((await this.store.find(tenant, name))!);
  }

  /**
   * Changes one of the tenant's own topics: its partitions grow (400 naming `partitions` for fewer than it has or
   * more than the cap; nothing changed), its retention is set. Another tenant's topic is 404, as a missing one.
   */
  async configure(tenant: string, name: string, body: unknown): Promise<TenantTopicView> {
    const change = parse(configureTopicSchema, body);
    const row = await this.get(tenant, name);
    if (change.partitions !== undefined) this.checkPartitions(change.partitions);
    if (change.partitions !== undefined && change.partitions < row.partitions) {
      throw new EventMeshError(
        ErrorCode.InvalidRequest,
        `partitions: the topic has ${row.partitions}; Kafka cannot lower a topic's partitions`,
        { field: 'partitions', reason: 'shrink', partitions: row.partitions },
      );
    }
    let made: { partitions: number };
    try {
      made = await this.topics.configureTopic(tenantTopicOf(tenant, name), change);
    } catch (e) {
      throw kafkaFailed('configure', name, e);
    }
    await this.store.configure(tenant, name, {
      partitions: made.partitions,
      ...(change.retentionMs === undefined ? {} : { retentionMs: change.retentionMs }),
    });
    this.log.info({ tenant, topic: name, ...change }, 'tenant topic configured');
    return viewOf((await this.store.find(tenant, name))!);
  }

  /** The tenant's own topics, by name (the operator's shared topics are not among them). */
  async list(tenant: string): Promise<TenantTopicView[]> {
    return (await this.store.list(tenant)).map(viewOf);
  }

  async get(tenant: string, name: string): Promise<TenantTopicView> {
    const row = TENANT_TOPIC_NAME.test(name) ? await this.store.find(tenant, name) : null;
    if (!row) throw unknownTopic(name);
    return viewOf(row);
  }

  /**
   * Deletes one of the tenant's own topics with its events: 409 TOPIC_IN_USE while a subscription of the tenant
   * reads it (delete those first). The name stops resolving before the events go; the Kafka topic stays, empty
   * (TopicAdmin.emptyTopic says why), and a topic of that name made again takes it up.
   */
  async delete(tenant: string, name: string): Promise<void> {
    await this.get(tenant, name);
    const topic = tenantTopicOf(tenant, name);
    const readers = await this.subscriptions.countOn(topic);
    if (readers > 0) {
      throw new EventMeshError(
        ErrorCode.TopicInUse,
        `topic "${name}" is read by ${readers} subscription(s); delete them first`,
        { name, subscriptions: readers },
      );
    }
    await this.store.setReady(tenant, name, false);
    try {
      await this.topics.emptyTopic(topic);
    } catch (e) {
      await this.store.setReady(tenant, name, true);
      throw kafkaFailed('delete', name, e);
    }
    await this.store.remove(tenant, name);
    this.log.info({ tenant, topic: name }, 'tenant topic deleted');
  }

  /** Grants a tenant `publish` or `subscribe` on a shared topic; `created` false when it had the grant already. */
  async grant(topic: string, body: unknown, grantedBy: string): Promise<{ grant: TopicGrantView; created: boolean }> {
    this.sharedTopic(topic);
    const { tenant, action } = parse(topicGrantSchema, body);
    const created = await this.grants.grant(topic, tenant, action, grantedBy);
    this.log.info({ topic, tenant, action, grantedBy, created }, 'topic granted');
    const grant = (await this.grants.list(topic)).find((g) => g.tenant === tenant && g.action === action)!;
    return { grant: grantViewOf(grant), created };
  }

  async listGrants(topic: string): Promise<TopicGrantView[]> {
    this.sharedTopic(topic);
    return (await this.grants.list(topic)).map(grantViewOf);
  }

  /** Takes a grant back: the tenant's next request on the topic is refused; 404 when it had no such grant. */
  async revoke(topic: string, tenant: string, action: string): Promise<void> {
    this.sharedTopic(topic);
    parse(topicGrantSchema, { tenant, action });
    if (!(await this.grants.revoke(topic, tenant, action)))
      throw new EventMeshError(ErrorCode.NotFound, `tenant "${tenant}" has no ${action} grant on topic "${topic}"`, {
        topic,
        tenant,
        action,
      });
    this.log.info({ topic, tenant, action }, 'topic grant revoked');
  }

  private checkPartitions(partitions: number): void {
    if (partitions > this.options.maxPartitions) {
      throw new EventMeshError(
        ErrorCode.InvalidRequest,
        `partitions: at most ${this.options.maxPartitions} (EVENTMESH_KAFKA_TENANT_TOPIC_MAX_PARTITIONS)`,
        { field: 'partitions', maxPartitions: this.options.maxPartitions },
      );
    }
  }

  /** Grants are of shared topics: any other name is 404 (the audit topic is no tenant's to use, 400). */
  private sharedTopic(topic: string): void {
    if (topic === this.options.auditTopic)
      throw new EventMeshError(ErrorCode.InvalidRequest, `topic "${topic}" is reserved: the runtime's only`, {
        field: 'topic',
        reason: 'reserved_topic',
      });
    if (!this.topics.isConfigured(topic)) throw unknownTopic(topic);
  }
}

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new EventMeshError(ErrorCode.InvalidRequest, `${issue.path.join('.') || 'body'}: ${issue.message}`, {
    field: issue.path.join('.'),
  });
}

function grantViewOf(row: TopicGrantEntity): TopicGrantView {
  return {
    topic: row.topic,
    tenant: row.tenant,
    action: row.action as TopicUse,
    grantedBy: row.grantedBy,
    createdAt: row.createdAt.toISOString(),
  };
}

function viewOf(row: TenantTopicEntity): TenantTopicView {
  return {
    name: row.name,
    partitions: row.partitions,
    retentionMs: row.retentionMs,
    createdAt: row.createdAt.toISOString(),
  };
}

const unknownTopic = (name: string) =>
  new EventMeshError(ErrorCode.UnknownTopic, `topic "${name}" is not served by this runtime`, { topic: name });

const reserved = (name: string) =>
  new EventMeshError(ErrorCode.Forbidden, `topic "${name}" is written by the runtime only`, {
    topic: name,
    reason: 'reserved_topic',
  });

const noGrant = (name: string, use: TopicUse) =>
  new EventMeshError(
    ErrorCode.Forbidden,
    `topic "${name}" is shared: the operator has not granted this tenant ${use} on it`,
    { topic: name, reason: 'no_grant' },
  );

const kafkaFailed = (what: 'create' | 'configure' | 'delete', name: string, e: unknown) =>
  new EventMeshError(
    ErrorCode.KafkaUnavailable,
    `could not ${what} topic "${name}" in Kafka: ${e instanceof Error ? e.message : String(e)}; nothing changed`,
    { topic: name },
    true,
  );

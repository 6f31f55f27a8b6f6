import { randomBytes, randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { EventMeshConfig } from '../config';
import { ErrorCode, EventMeshError } from '../errors';
import { compileFilters } from '../filter';
import type { TopicAdmin } from '../kafka';
import { createLogger } from '../logging';
import { SubscriptionEntity, SubscriptionOffsetEntity } from '../storage';
import { createSubscriptionSchema, SubscriptionView } from './subscription.schema';
import { validateWebhookTarget } from './webhook-handshake';

/**
 * The subscriptions resource. A subscription's start position is resolved to concrete offsets when it is
 * created, in the same transaction, so no event published after the create answered is ever skipped, however
 * late the dispatch loop picks the subscription up.
 */
export class SubscriptionService {
  private readonly log = createLogger('SubscriptionService');

  constructor(
    private readonly db: DataSource,
    private readonly topics: TopicAdmin,
    private readonly options: { instanceId: string; defaultTopic: string; webhookOrigin: string; webhookTimeoutMs: number },
  ) {}

  /** The service as an instance runs it, from its configuration. */
  static forInstance(db: DataSource, topics: TopicAdmin, config: EventMeshConfig): SubscriptionService {
    return new SubscriptionService(db, topics, {
      instanceId: config.instance.id,
      defaultTopic: config.kafka.topics[0],
      webhookOrigin: config.delivery.webhookOrigin,
      webhookTimeoutMs: config.delivery.webhookTimeoutMs,
    });
  }

  async create(body: unknown): Promise<SubscriptionView> {
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
    const topic = request.topic ?? this.options.defaultTopic;
    if (!this.topics.isServed(topic)) {
      throw new EventMeshError(ErrorCode.UnknownTopic, `topic "${topic}" is not served by this runtime`, { topic });
    }
    if (!request.config.trusted) {
      await validateWebhookTarget(request.sink, this.options.webhookOrigin, this.options.webhookTimeoutMs);
    }
    const startFrom = request.config.startFrom;
    const starts =
      startFrom === 'latest'
        ? await this.topics.endOffsets(topic)
        : startFrom === 'earliest'
          ? await this.topics.startOffsets(topic)
          : await this.topics.offsetsAt(topic, Date.parse(startFrom));

    const id = randomUUID();
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    await this.db.transaction(async (tx) => {
      await tx.insert(SubscriptionEntity, {
        id,
        topic,
        protocol: request.protocol,
        sink: request.sink,
        filters: request.filters as object[],
        config: request.config,
        signingSecret: secret,
        instanceId: this.options.instanceId,
        status: 'ACTIVE',
      });
      await tx.insert(
        SubscriptionOffsetEntity,
        [...starts].map(([partition, nextOffset]) => ({ subscriptionId: id, topic, partition, nextOffset, epoch: 0 })),
      );
    });
    this.log.info({ subscription: id, topic, sink: request.sink, startFrom }, 'subscription created');
    return { ...(await this.get(id)), secret };
  }

  async get(id: string): Promise<SubscriptionView> {
    const row = isUuid(id) ? await this.db.manager.findOneBy(SubscriptionEntity, { id }) : null;
    if (!row) throw new EventMeshError(ErrorCode.SubscriptionNotFound, `subscription ${id} does not exist`, { id });
    return view(row);
  }

  async list(): Promise<SubscriptionView[]> {
    const rows = await this.db.manager.find(SubscriptionEntity, { order: { createdAt: 'ASC' } });
    return rows.map(view);
  }

  async delete(id: string): Promise<void> {
    const result = isUuid(id) ? await this.db.manager.delete(SubscriptionEntity, { id }) : { affected: 0 };
    if (!result.affected) {
      throw new EventMeshError(ErrorCode.SubscriptionNotFound, `subscription ${id} does not exist`, { id });
    }
    this.log.info({ subscription: id }, 'subscription deleted');
  }

  /** Stops delivery to a subscription (its sink answered 410 Gone); it stays readable with its reason. */
  async disable(id: string, reason: string): Promise<void> {
    await this.db.manager.update(SubscriptionEntity, { id }, { status: 'DISABLED', updatedAt: new Date() });
    this.log.warn({ subscription: id, reason }, 'subscription disabled');
  }

  /** Active subscriptions this instance dispatches (LOCAL_STICKY_PULL). */
  async activeFor(instanceId: string): Promise<SubscriptionEntity[]> {
    return this.db.manager.find(SubscriptionEntity, { where: { instanceId, status: 'ACTIVE' } });
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const isUuid = (s: string) => UUID.test(s);

function view(row: SubscriptionEntity): SubscriptionView {
  return {
    id: row.id,
    topic: row.topic,
    protocol: row.protocol,
    sink: row.sink,
    filters: row.filters,
    config: row.config,
    instance: row.instanceId,
    status: row.status,
    createdAt: row.createdAt.toISOString(),
  };
}

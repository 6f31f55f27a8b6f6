import { ConfigResourceTypes, type Admin, type Kafka } from 'kafkajs';
import type { EventMeshConfig } from '@libs/config';
import { createLogger } from '@libs/logging';
import { isAgentTopic, isTenantTopic } from './runtime-topics';
import { createTopicsAndWait } from './topic-creation';

/** Topic metadata and lifecycle: the topics the runtime serves exist, and their partitions and ends are known. */
export class TopicAdmin {
  private readonly log = createLogger('TopicAdmin');
  private readonly admin: Admin;
  /** Partition lists, re-read after a while so partitions added to a topic are picked up. */
  private readonly partitionCache = new Map<string, { partitions: number[]; at: number }>();
  private static readonly PARTITIONS_TTL_MS = 30000;

  constructor(
    kafka: Kafka,
    private readonly config: EventMeshConfig['kafka'],
  ) {
    this.admin = kafka.admin({ retry: { retries: 2 } });
  }

  async connect(): Promise<void> {
    await this.admin.connect();
  }

  async disconnect(): Promise<void> {
    await this.admin.disconnect();
  }

  /** Creates the configured topics that do not exist yet and reads their partitions; returns the ones it created. */
  async ensureTopics(): Promise<string[]> {
    const existing = new Set(await this.admin.listTopics());
    const missing = this.config.topics.filter((t) => !existing.has(t));
    if (missing.length > 0) {
      await createTopicsAndWait(
        this.admin,
        missing.map((topic) => ({
          topic,
          numPartitions: this.config.topicPartitions,
          replicationFactor: this.config.replicationFactor,
        })),
      );
      this.log.info({ topics: missing, partitions: this.config.topicPartitions }, 'created topics');
    }
    // Known before the first publish, which then never waits for them (knownPartitionsOf).
    for (const topic of this.config.topics) {
      await this.partitionsOf(topic).catch((e: Error) =>
        this.log.warn(
          { topic, error: e.message },
          'could not read the partitions of the topic yet; the first publish reads them',
        ),
      );
    }
    return missing;
  }

  /**
   * Creates one topic the runtime made for itself (an A2A agent's request topic) when it does not exist yet, with
   * the configured partitions and replication; `created` says whether this call created it.
   */
  async ensureTopic(topic: string): Promise<{ created: boolean }> {
    const created = await createTopicsAndWait(this.admin, [
      { topic, numPartitions: this.config.topicPartitions, replicationFactor: this.config.replicationFactor },
    ]);
    if (created) this.log.info({ topic, partitions: this.config.topicPartitions }, 'created topic');
    await this.readPartitions(topic);
    return { created };
  }

  /**
   * A tenant's own topic (libs/kafka/runtime-topics.ts), made by `POST /topics` with its partitions and retention
   * (`retentionMs` absent: the broker's default). One emptied by `emptyTopic` is taken up again: its retention set
   * as asked, its partitions raised to the count asked (Kafka never lowers them). Resolves the partitions it has.
   */
  async createTopic(topic: string, partitions: number, retentionMs?: number): Promise<{ partitions: number }> {
    const configEntries = retentionMs === undefined ? [] : [{ name: 'retention.ms', value: String(retentionMs) }];
    const created = await createTopicsAndWait(this.admin, [
      { topic, numPartitions: partitions, replicationFactor: this.config.replicationFactor, configEntries },
    ]);
    let has = partitions;
    if (!created) {
      await this.admin.alterConfigs({
        validateOnly: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries }],
      });
      const had = (await this.readPartitions(topic)).length;
      if (had < partitions) await this.admin.createPartitions({ topicPartitions: [{ topic, count: partitions }] });
      has = Math.max(had, partitions);
    }
    this.log.info(
      { topic, partitions: has, retentionMs, created },
      created ? 'created topic' : 'took up emptied topic',
    );
    return { partitions: has };
  }

  /**
   * Changes a tenant's own topic (`PATCH /topics/{name}`): `retentionMs` becomes its `retention.ms` (the only
   * config such a topic has: the non-incremental alterConfigs keeps no other), `partitions` its partition count
   * when higher (Kafka never lowers it; the caller refuses a lower one). Resolves the partitions it has.
   */
  async configureTopic(
    topic: string,
    change: { partitions?: number; retentionMs?: number },
  ): Promise<{ partitions: number }> {
    if (change.retentionMs !== undefined) {
      await this.admin.alterConfigs({
        validateOnly: false,
        resources: [
          {
            type: ConfigResourceTypes.TOPIC,
            name: topic,
            configEntries: [{ name: 'retention.ms', value: String(change.retentionMs) }],
          },
        ],
      });
    }
    const had = (await this.readPartitions(topic)).length;
    const partitions = Math.max(had, change.partitions ?? had);
    if (partitions > had) {
      await this.admin.createPartitions({ topicPartitions: [{ topic, count: partitions }] });
      // The publish path spreads over the new partitions from now on, not after the cache's TTL.
      await this.readPartitions(topic);
    }
    this.log.info({ topic, partitions, retentionMs: change.retentionMs }, 'configured topic');
    return { partitions };
  }

  /**
   * Deletes every event of a topic (`DELETE /topics/{name}`), keeping the topic itself: a kafkajs producer that
   * ever wrote to a topic asks for its metadata on every refresh and fails every send once it is gone, on every
   * instance, until restarted (kafkajs 2.2 forgets no topic). The name is taken up again by `createTopic`.
   */
  async emptyTopic(topic: string): Promise<void> {
    for (const p of await this.admin.fetchTopicOffsets(topic))
      if (Number(p.high) > Number(p.low))
        await this.admin.deleteTopicRecords({ topic, partitions: [{ partition: p.partition, offset: p.high }] });
    this.log.info({ topic }, 'emptied topic');
  }

  /**
   * The configured topics, the A2A agents' topics (made at registration; libs/a2a/relay/request-topic.ts) and the tenants'
   * own topics (made by `POST /topics`). Which tenant may use which is decided before (libs/topics).
   */
  isServed(topic: string): boolean {
    return this.isConfigured(topic) || isAgentTopic(topic) || isTenantTopic(topic);
  }

  /** One of the topics of `EVENTMESH_KAFKA_TOPICS`: the operator's, shared by every tenant. */
  isConfigured(topic: string): boolean {
    return this.config.topics.includes(topic);
  }

  async partitionsOf(topic: string): Promise<number[]> {
    const cached = this.partitionCache.get(topic);
    if (cached && Date.now() - cached.at < TopicAdmin.PARTITIONS_TTL_MS) return cached.partitions;
    return this.readPartitions(topic);
  }

  /**
   * The partitions last read for the topic, without waiting: a stale list is returned as it is while one read in
   * the background refreshes it, so a publish never waits on (an unreachable) Kafka for metadata it already has.
   * Undefined when none was read yet.
   */
  knownPartitionsOf(topic: string): number[] | undefined {
    const cached = this.partitionCache.get(topic);
    if (cached && Date.now() - cached.at >= TopicAdmin.PARTITIONS_TTL_MS && !this.refreshing.has(topic)) {
      this.readPartitions(topic).catch((e: Error) =>
        this.log.warn(
          { topic, error: e.message },
          'could not refresh the partitions of the topic; the last list stays in use',
        ),
      );
    }
    return cached?.partitions;
  }

  private readonly refreshing = new Map<string, Promise<number[]>>();

  /**
   * One read at a time per topic, from the cluster's metadata: the partitions exist once the topic does, whether or
   * not each has a leader yet (reading offsets instead, as this did, fails with NOT_LEADER_FOR_PARTITION right after
   * a topic is created or a broker restarts).
   */
  private readPartitions(topic: string): Promise<number[]> {
    let reading = this.refreshing.get(topic);
    if (!reading) {
      reading = this.admin
        .fetchTopicMetadata({ topics: [topic] })
        .then(({ topics }) => {
          const partitions = (topics.find((t) => t.name === topic)?.partitions ?? [])
            .map((p) => p.partitionId)
            .sort((a, b) => a - b);
          if (partitions.length === 0) throw new Error(`the cluster's metadata lists no partition of topic ${topic}`);
          this.partitionCache.set(topic, { partitions, at: Date.now() });
          return partitions;
        })
        .finally(() => this.refreshing.delete(topic));
      this.refreshing.set(topic, reading);
    }
    return reading;
  }

  /** The next offset to be written in each partition of the topic (its high watermark). */
  async endOffsets(topic: string): Promise<Map<number, number>> {
    const offsets = await this.admin.fetchTopicOffsets(topic);
    return new Map(offsets.map((o) => [o.partition, Number(o.high)]));
  }

  /** The first offset still stored in each partition. */
  async startOffsets(topic: string): Promise<Map<number, number>> {
    const offsets = await this.admin.fetchTopicOffsets(topic);
    return new Map(offsets.map((o) => [o.partition, Number(o.low)]));
  }

  /** The first offset at or after the timestamp in each partition (the end when none is). */
  async offsetsAt(topic: string, timestampMs: number): Promise<Map<number, number>> {
    const offsets = await this.admin.fetchTopicOffsetsByTimestamp(topic, timestampMs);
    const ends = await this.endOffsets(topic);
    return new Map(offsets.map((o) => [o.partition, Number(o.offset) < 0 ? ends.get(o.partition)! : Number(o.offset)]));
  }

  async describeCluster(): Promise<{ brokers: number; controller: number | null }> {
    const d = await this.admin.describeCluster();
    return { brokers: d.brokers.length, controller: d.controller };
  }
}

import type { IHeaders, Kafka } from 'kafkajs';
import { installFastKafkajsEncoding } from '@libs/kafkajs-patches';

/**
 * Reads chosen partitions from chosen offsets, with no consumer group: the runtime decides who reads what and
 * keeps offsets in Postgres, so Kafka must not. kafkajs has no public `assign()`; its consumer always joins a
 * group, and every join costs a rebalance. This reader sends Fetch requests straight to each partition's leader
 * through the kafkajs cluster the client already builds (the same connection pool, metadata and protocol code its
 * consumer uses), and nothing is ever committed to Kafka. docs/kafka-reading.md explains the choice.
 *
 * The cluster is reached through the kafkajs client's private factory. kafkajs is pinned to 2.2.4 in
 * package.json, and test/integration/partition-reader.spec.ts exercises this against the real broker.
 */

export interface PartitionPosition {
  topic: string;
  partition: number;
  /** The first offset wanted. */
  offset: number;
  /**
   * The most bytes of this partition the fetch brings (else `maxBytesPerPartition`): kafkajs decodes every record a
   * fetch brings, so a caller with room for fewer records than that asks for less.
   */
  maxBytes?: number;
}

export interface FetchedRecord {
  offset: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: IHeaders;
  timestamp: number;
}

export interface FetchedPartition {
  topic: string;
  partition: number;
  /** The offset the fetch started at. */
  fetchOffset: number;
  /** Records at or after `fetchOffset`, in offset order (control records and earlier records removed). */
  records: FetchedRecord[];
  highWatermark: number;
  /** Set when the wanted offset no longer (or not yet) exists; the caller decides where to resume. */
  outOfRange?: boolean;
}

interface KafkaMessageInternal {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: IHeaders;
  timestamp: string;
  isControlRecord?: boolean;
}

interface BrokerInternal {
  fetch(request: {
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    isolationLevel: number;
    topics: { topic: string; partitions: { partition: number; fetchOffset: string; maxBytes: number }[] }[];
  }): Promise<{
    responses: {
      topicName: string;
      partitions: { partition: number; errorCode: number; highWatermark: string; messages: KafkaMessageInternal[] }[];
    }[];
  }>;
}

interface ClusterInternal {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  refreshMetadata(): Promise<void>;
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(args: { nodeId: string }): Promise<BrokerInternal>;
}

const STALE_METADATA = new Set([
  'LEADER_NOT_AVAILABLE',
  'NOT_LEADER_FOR_PARTITION',
  'NOT_LEADER_OR_FOLLOWER',
  'FENCED_LEADER_EPOCH',
  'UNKNOWN_LEADER_EPOCH',
  'UNKNOWN_TOPIC_OR_PARTITION',
]);

const READ_UNCOMMITTED = 0;

function createCluster(kafka: Kafka): ClusterInternal {
  const factory = Object.getOwnPropertySymbols(kafka).find((s) => s.description === 'private:Kafka:createCluster');
  const create = factory && (kafka as unknown as Record<symbol, unknown>)[factory];
  if (typeof create !== 'function') {
    throw new Error('kafkajs internals changed: the partition reader needs kafkajs 2.2.x');
  }
  return (create as (o: object) => ClusterInternal)({ allowAutoTopicCreation: false, metadataMaxAge: 300000 });
}

export interface FetchOptions {
  /** How long the broker may hold the request when no records are there yet. */
  maxWaitMs: number;
  maxBytesPerPartition?: number;
}

export class PartitionReader {
  private readonly cluster: ClusterInternal;
  private readonly topics = new Set<string>();

  constructor(kafka: Kafka) {
    // kafkajs decodes every record a fetch brings; this reads them into the same objects for less (a process that
    // fetches before it produces installs it here, before its first fetch loads kafkajs's record batch decoder).
    installFastKafkajsEncoding();
    this.cluster = createCluster(kafka);
  }

  async connect(): Promise<void> {
    await this.cluster.connect();
  }

  async disconnect(): Promise<void> {
    await this.cluster.disconnect();
  }

  /** One Fetch per leader broker, in parallel; a partition with nothing new comes back with no records. */
  async fetch(positions: PartitionPosition[], options: FetchOptions): Promise<FetchedPartition[]> {
    if (positions.length === 0) return [];
    try {
      const newTopics = [...new Set(positions.map((p) => p.topic))].filter((t) => !this.topics.has(t));
      if (newTopics.length > 0) {
        await this.cluster.addMultipleTargetTopics(newTopics);
        newTopics.forEach((t) => this.topics.add(t));
      }
      return await this.fetchAll(positions, options);
    } catch (e) {
      const type = (e as { type?: string }).type;
      if (type === 'OFFSET_OUT_OF_RANGE') return this.fetchOneByOne(positions, options);
      if ((type && STALE_METADATA.has(type)) || (e as Error).name === 'KafkaJSTopicMetadataNotLoaded') {
        // The caller backs off before its next fetch; the refreshed metadata serves that one.
        await this.cluster.refreshMetadata().catch(() => undefined);
      }
      throw e;
    }
  }

  /** After an out-of-range answer, find which positions caused it so the others still make progress. */
  private async fetchOneByOne(positions: PartitionPosition[], options: FetchOptions): Promise<FetchedPartition[]> {
    const out: FetchedPartition[] = [];
    for (const p of positions) {
      try {
        out.push(...(await this.fetchAll([p], { ...options, maxWaitMs: 0 })));
      } catch (e) {
        if ((e as { type?: string }).type !== 'OFFSET_OUT_OF_RANGE') throw e;
        out.push({
          topic: p.topic,
          partition: p.partition,
          fetchOffset: p.offset,
          records: [],
          highWatermark: -1,
          outOfRange: true,
        });
      }
    }
    return out;
  }

  private async fetchAll(positions: PartitionPosition[], options: FetchOptions): Promise<FetchedPartition[]> {
    const byLeader = new Map<string, PartitionPosition[]>();
    let unknown = 0;
    for (const [topic, list] of groupBy(positions, (p) => p.topic)) {
      const leaders = this.cluster.findLeaderForPartitions(
        topic,
        list.map((p) => p.partition),
      );
      unknown += list.length - Object.values(leaders).reduce((n, ps) => n + ps.length, 0);
      for (const [nodeId, partitions] of Object.entries(leaders)) {
        const entries = byLeader.get(nodeId) ?? [];
        entries.push(...list.filter((p) => partitions.includes(p.partition)));
        byLeader.set(nodeId, entries);
      }
    }
    // Partitions the cached metadata does not know yet (added to the topic since): learn them for the next fetch.
    if (unknown > 0) await this.cluster.refreshMetadata();
    const results = await Promise.all(
      [...byLeader.entries()].map(([nodeId, list]) => this.fetchFromLeader(nodeId, list, options)),
    );
    return results.flat();
  }

  private async fetchFromLeader(
    nodeId: string,
    list: PartitionPosition[],
    options: FetchOptions,
  ): Promise<FetchedPartition[]> {
    const broker = await this.cluster.findBroker({ nodeId });
    const maxBytesOf = (p: PartitionPosition) => p.maxBytes ?? options.maxBytesPerPartition ?? 1024 * 1024;
    const wanted = new Map(list.map((p) => [`${p.topic}#${p.partition}`, p.offset]));
    const { responses } = await broker.fetch({
      maxWaitTime: options.maxWaitMs,
      minBytes: 1,
      maxBytes: list.reduce((sum, p) => sum + maxBytesOf(p), 0),
      isolationLevel: READ_UNCOMMITTED,
      topics: [...groupBy(list, (p) => p.topic)].map(([topic, ps]) => ({
        topic,
        partitions: ps.map((p) => ({ partition: p.partition, fetchOffset: String(p.offset), maxBytes: maxBytesOf(p) })),
      })),
    });
    return responses.flatMap(({ topicName, partitions }) =>
      partitions.map((data) => {
        const fetchOffset = wanted.get(`${topicName}#${data.partition}`) ?? 0;
        const records: FetchedRecord[] = [];
        for (const m of data.messages) {
          const offset = Number(m.offset);
          // A compressed batch can start before the wanted offset; control records are not events.
          if (offset < fetchOffset || m.isControlRecord) continue;
          records.push({ offset, key: m.key, value: m.value, headers: m.headers, timestamp: Number(m.timestamp) });
        }
        return {
          topic: topicName,
          partition: data.partition,
          fetchOffset,
          records,
          highWatermark: Number(data.highWatermark),
        };
      }),
    );
  }
}

function groupBy<T>(items: T[], keyOf: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = keyOf(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

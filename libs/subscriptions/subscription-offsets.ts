import type { DataSource } from 'typeorm';
import { z } from 'zod';
import type { DeliveryTopology, EventMeshConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { TopicAdmin } from '@libs/kafka';
import { createLogger } from '@libs/logging';
import {
  DeadLetterStore,
  DispatchRunStore,
  LeaseStore,
  OffsetStore,
  RetryStore,
  setTransactionLockTimeout,
  SubscriptionEntity,
  SubscriptionStore,
} from '@libs/storage';
import { startFromSchema } from './subscription.schema';
import { isUuid, subscriptionNotFound } from './subscription.service';

/** One partition of a subscription: where it stands, how far the log goes, and who delivers it under which epoch. */
export interface PartitionOffsetView {
  partition: number;
  /** The next offset the subscription has not settled (what Postgres holds); null when the partition has no row yet. */
  committed: number | null;
  /** The first offset Kafka still stores. */
  start: number;
  /** The end (high-water) offset: the offset the next event will take. */
  end: number;
  /** Events not yet settled: end - committed (from the log start when nothing is committed). */
  lag: number;
  /** The instance that delivers it: the partition lease's owner (PARTITION_OWNED_PULL) or the pinned instance (LOCAL_STICKY_PULL). */
  owner: string | null;
  /** That owner's fencing epoch: the partition lease's, or the instance's dispatch run's; null when it has none yet. */
  epoch: number | null;
}

export interface OffsetsView {
  subscriptionId: string;
  topic: string;
  status: string;
  topology: DeliveryTopology;
  /** How many seeks moved the offsets so far (`subscriptions.offsets_generation`). */
  generation: number;
  partitions: PartitionOffsetView[];
}

export interface SeekView {
  subscriptionId: string;
  topic: string;
  /** What was asked: `earliest`, `latest`, a timestamp, or `offsets`. */
  to: string;
  /** The subscription's offsets generation after the seek. */
  generation: number;
  /** Per partition moved: the stored next offset before (null: none was stored) and after. */
  partitions: { partition: number; from: number | null; to: number }[];
  /** Parked deliveries at or after the new offsets, forgotten: the lanes read those events from Kafka again. */
  parkedForgotten: number;
}

/**
 * A seek: `to` the start of the log (`earliest`), its end (`latest`), or the first event at or after a time (ISO
 * 8601) in every partition; or `offsets`, explicit next offsets for the partitions named (the others stay).
 */
export const seekSchema = z.union([
  z.object({ to: startFromSchema }).strict(),
  z
    .object({
      offsets: z
        .array(z.object({ partition: z.number().int().min(0), offset: z.number().int().min(0) }).strict())
        .min(1)
        .refine((o) => new Set(o.map((p) => p.partition)).size === o.length, 'a partition is named twice'),
    })
    .strict(),
]);
export type SeekRequest = z.infer<typeof seekSchema>;

/** Bounds every lock wait of a seek's transaction: a loop's commit holds the rows for one statement. */
const SEEK_LOCK_TIMEOUT = '5s';

/**
 * A subscription's offsets, for operators: what each partition holds against the log (`view`), and moving them
 * (`seek`). A seek is one Postgres transaction, whoever delivers the partitions (docs/operations.md): it raises
 * the subscription's offsets generation, sets every named partition's next offset, and forgets the parked
 * deliveries at or after the new offsets (the lanes read those events from Kafka again; parked deliveries before
 * them stay and are retried as before). Every dispatch loop's commit carries the generation its lane started from,
 * and a row written by the seek refuses an older one (offset-store.ts), in the row's own lock: a seek and a commit
 * never interleave, and the seek's position stands. The loops restart the subscription's lanes from the new
 * offsets at their next refresh (within a second), or at once when a commit is refused.
 */
export class SubscriptionOffsets {
  private readonly log = createLogger('SubscriptionOffsets');
  private readonly offsets: OffsetStore;
  private readonly retries: RetryStore;
  private readonly subscriptions: SubscriptionStore;

  constructor(
    private readonly db: DataSource,
    private readonly topics: TopicAdmin,
    private readonly owners: { topology: DeliveryTopology; runs: DispatchRunStore; leases: LeaseStore },
  ) {
    this.offsets = new OffsetStore(db);
    this.retries = new RetryStore(db, new DeadLetterStore(db));
    this.subscriptions = new SubscriptionStore(db);
  }

  static forInstance(db: DataSource, topics: TopicAdmin, config: EventMeshConfig): SubscriptionOffsets {
    const waitLimitMs = Math.floor(config.delivery.leaseTtlMs / 2);
    return new SubscriptionOffsets(db, topics, {
      topology: config.delivery.topology,
      runs: new DispatchRunStore(db, waitLimitMs),
      leases: new LeaseStore(db, waitLimitMs),
    });
  }

  private async subscription(id: string, tenant: string): Promise<SubscriptionEntity> {
    const row = isUuid(id) ? await this.subscriptions.get(id, tenant) : null;
    if (!row) throw subscriptionNotFound(id);
    return row;
  }

  /** Per partition of the subscription's topic: committed, log start and end, lag, owner and epoch. */
  async view(id: string, tenant: string): Promise<OffsetsView> {
    const s = await this.subscription(id, tenant);
    const [starts, ends, stored] = await Promise.all([
      this.topics.startOffsets(s.topic),
      this.topics.endOffsets(s.topic),
      this.offsets.positionsOf([s.id]),
    ]);
    const committed = new Map(stored.filter((p) => p.topic === s.topic).map((p) => [p.partition, p.nextOffset]));
    const ownerOf = await this.ownersOf(s);
    const partitions = [...ends.keys()]
      .sort((a, b) => a - b)
      .map((partition): PartitionOffsetView => {
        const end = ends.get(partition)!;
        const start = starts.get(partition) ?? 0;
        const at = committed.get(partition) ?? null;
        const { owner, epoch } = ownerOf(partition);
        return {
          partition,
          committed: at,
          start,
          end,
          lag: Math.max(0, end - Math.max(at ?? start, start)),
          owner,
          epoch,
        };
      });
    return {
      subscriptionId: s.id,
      topic: s.topic,
      status: s.status,
      topology: this.owners.topology,
      generation: Number(s.offsetsGeneration),
      partitions,
    };
  }

  /** Who delivers each partition of the subscription, and under which epoch. */
  private async ownersOf(
    s: SubscriptionEntity,
  ): Promise<(partition: number) => { owner: string | null; epoch: number | null }> {
    if (this.owners.topology === 'PARTITION_OWNED_PULL') {
      const leases = new Map((await this.owners.leases.list([s.topic])).map((l) => [l.partition, l]));
      return (partition) => {
        const lease = leases.get(partition);
        return { owner: lease?.owner ?? null, epoch: lease ? lease.epoch : null };
      };
    }
    const run = await this.owners.runs.get(s.instanceId);
    return () => ({ owner: s.instanceId, epoch: run ? run.epoch : null });
  }

  /**
   * Moves the subscription's offsets (see the class), and answers what moved, per partition. A partition named
   * that the topic has not, or an offset outside its log, is a 400 and nothing moves. `actor` is named in the log
   * line (the gate's audit record has the request).
   */
  async seek(id: string, request: SeekRequest, tenant: string, actor: string): Promise<SeekView> {
    const s = await this.subscription(id, tenant);
    const targets = await this.targetsOf(s.topic, request);
    const done = await this.db.transaction(async (m) => {
      await setTransactionLockTimeout(m, SEEK_LOCK_TIMEOUT);
      const result = await this.offsets.seek(s.id, targets, m);
      if (!result.applied) throw subscriptionNotFound(id);
      const forgotten = await this.retries.forgetReplayed(
        result.moves.map((move) => ({
          subscriptionId: s.id,
          topic: move.topic,
          partition: move.partition,
          nextOffset: move.to,
        })),
        m,
      );
      return { ...result, forgotten };
    });
    const to = 'to' in request ? request.to : 'offsets';
    const partitions = done.moves.map((move) => ({ partition: move.partition, from: move.from, to: move.to }));
    this.log.info(
      {
        subscription: s.id,
        tenant,
        topic: s.topic,
        actor,
        to,
        generation: done.generation,
        partitions,
        parkedForgotten: done.forgotten,
      },
      'subscription offsets moved by an operator seek; its lanes restart from the new offsets',
    );
    return {
      subscriptionId: s.id,
      topic: s.topic,
      to,
      generation: done.generation,
      partitions,
      parkedForgotten: done.forgotten,
    };
  }

  /** The next offset of each partition the seek moves, checked against the log. */
  private async targetsOf(
    topic: string,
    request: SeekRequest,
  ): Promise<{ topic: string; partition: number; nextOffset: number }[]> {
    if ('to' in request) {
      const at =
        request.to === 'earliest'
          ? await this.topics.startOffsets(topic)
          : request.to === 'latest'
            ? await this.topics.endOffsets(topic)
            : // Kafka takes no time before 1970 (-1 and -2 mean latest and earliest): such a time is the log's start.
              await this.topics.offsetsAt(topic, Math.max(0, Date.parse(request.to)));
      return [...at].map(([partition, nextOffset]) => ({ topic, partition, nextOffset }));
    }
    const [starts, ends] = await Promise.all([this.topics.startOffsets(topic), this.topics.endOffsets(topic)]);
    return request.offsets.map(({ partition, offset }, i) => {
      const end = ends.get(partition);
      if (end === undefined) {
        throw new EventMeshError(
          ErrorCode.OffsetOutOfRange,
          `offsets.${i}.partition: topic "${topic}" has no partition ${partition}`,
          {
            field: `offsets.${i}.partition`,
            partitions: [...ends.keys()].sort((a, b) => a - b),
          },
        );
      }
      const start = starts.get(partition) ?? 0;
      if (offset < start || offset > end) {
        throw new EventMeshError(
          ErrorCode.OffsetOutOfRange,
          `offsets.${i}.offset: partition ${partition} of "${topic}" holds offsets ${start} to ${end} (the end: the next event); ${offset} is outside`,
          { field: `offsets.${i}.offset`, partition, start, end },
        );
      }
      return { topic, partition, nextOffset: offset };
    });
  }
}

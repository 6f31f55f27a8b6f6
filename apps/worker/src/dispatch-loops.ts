import type { EventMeshConfig } from '@libs/config';
import { DispatchLoopDeps, TenantRecordsTopic, WebhookSender } from '@libs/delivery';
import { PartitionReader } from '@libs/kafka';
import { Dependencies } from '@libs/runtime';
import { SharedRead } from '@libs/runtime';
import { DeadLetterStore, OffsetStore, RetryStore, SkippedRangeStore, SubscriptionEntity } from '@libs/storage';
import { WriteFence } from '@libs/fence';
import { SinkRouter, StreamDeliverer } from '@libs/streams';
import { SubscriptionService } from '@libs/subscriptions';
import type { WorkerObservers } from './worker-host';

/**
 * How long one read of a topic's active subscriptions serves its partitions' loops. A change (a new subscription,
 * a pause) is seen at most this much later than the loops' one-second refresh.
 */
const ACTIVE_ON_TOPIC_SHARED_MS = 250;

/** What every dispatch loop of the instance shares, and how each one is made (libs/delivery/dispatch-loop.ts). */
export interface DispatchLoops {
  subscriptions: SubscriptionService;
  webhooks: WebhookSender;
  /** Webhooks and the streams' deliveries, each loop's sends fenced by its epoch. */
  sender: SinkRouter;
  /** The instance's reader (LOCAL_STICKY_PULL's one loop reads through it; each owned partition has its own). */
  reader: PartitionReader;
  /** A loop's dependencies: these stores, its reader and fence, the delivery settings of the configuration. */
  depsFor(reader: PartitionReader, fence: WriteFence, extra?: Partial<DispatchLoopDeps>): DispatchLoopDeps;
  /**
   * A topic's active subscriptions, one read shared by the loops of its partitions within
   * ACTIVE_ON_TOPIC_SHARED_MS (one query a second per topic, not one per partition).
   */
  activeOnTopic(topic: string): Promise<SubscriptionEntity[]>;
}

/**
 * The dispatch loops' stores, on their own pool (createDispatchDataSource): the main pool's other users can neither
 * starve nor strand delivery. Connects the instance's reader.
 */
export async function createDispatchLoops(
  config: EventMeshConfig,
  deps: Dependencies,
  streams: StreamDeliverer,
  { metrics, running }: WorkerObservers,
): Promise<DispatchLoops> {
  const loopDb = deps.dispatchDb;
  const offsets = new OffsetStore(loopDb);
  const deadLetters = new DeadLetterStore(loopDb);
  const retries = new RetryStore(loopDb, deadLetters);
  const skipped = new SkippedRangeStore(loopDb);
  const subscriptions = SubscriptionService.forInstance(loopDb, deps.topics, config);
  const webhooks = WebhookSender.forInstance(config);
  const sender = new SinkRouter(webhooks, streams, 0, deps.tracing);
  const reader = new PartitionReader(deps.kafka);
  await reader.connect();
  const activeReads = new Map<string, SharedRead<SubscriptionEntity[]>>();
  return {
    subscriptions,
    webhooks,
    sender,
    reader,
    depsFor: (reader, fence, extra = {}) => ({
      fence,
      instanceId: config.instance.id,
      subscriptions,
      offsets,
      deadLetters,
      retries,
      skipped,
      reader,
      topics: deps.topics,
      sender: sender.withEpoch(fence.epoch),
      options: {
        pollMaxWaitMs: 500,
        batchMaxEvents: config.delivery.pollBatchMaxEvents,
        concurrency: config.delivery.concurrency,
        refreshIntervalMs: 1000,
        retryInitialMs: config.delivery.retryInitialMs,
        retryMaxMs: config.delivery.retryMaxMs,
        maxAttempts: config.delivery.maxAttempts,
        breaker: {
          failureThreshold: config.delivery.breakerFailureThreshold,
          openMs: config.delivery.breakerOpenMs,
          maxOpenMs: config.delivery.breakerMaxOpenMs,
        },
        maxParked: config.delivery.retryMaxParked,
        filterMaxAttributeChars: config.filter.maxAttributeChars,
        sinkFailureSummaryMs: config.log.sinkFailureSummaryMs,
        tenantRecords: tenantRecordsOf(config),
      },
      metrics,
      running,
      ...extra,
    }),
    activeOnTopic: (topic) => {
      let read = activeReads.get(topic);
      if (!read)
        activeReads.set(
          topic,
          (read = new SharedRead(() => subscriptions.activeOnTopic(topic), ACTIVE_ON_TOPIC_SHARED_MS)),
        );
      return read.get();
    },
  };
}

/** The audit topic, when the CloudEvents audit sink writes one: its records are delivered to each tenant its own. */
function tenantRecordsOf(config: EventMeshConfig): TenantRecordsTopic | undefined {
  const audit = config.security.gate.audit;
  if (audit.sink !== 'CLOUDEVENTS') return undefined;
  return { topic: audit.topic, operatorTenant: config.admin.security.operatorTenant };
}

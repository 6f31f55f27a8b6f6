import type { EventFrame } from '@libs/frame';
import type { PartitionReader, TopicAdmin } from '@libs/kafka';
import { StaleEpochError } from '@libs/fence';
import type { EntityManager } from 'typeorm';
import type { DeadLetterStore, OffsetStore, RetryStore, SkippedRangeStore, SubscriptionEntity } from '@libs/storage';
import type { WriteFence } from '@libs/fence';
import type { CircuitBreakerOptions, CircuitBreakers } from './circuit-breaker';
import type { RunningLoops } from './running-loops';
import type { TenantRecordsTopic } from './tenant-records';
import type { RuntimeMetrics } from '@libs/metrics';
import type { Lanes } from './lane';
import { FencedError } from './offset-committer';
import type { DispatchProgress } from './progress';
import type { OutBatch } from './webhook-batch';
import type { WebhookResult, WebhookTarget } from './webhook-sender';

/** Delivers one event to a subscription's sink: its webhook, or its stream clients (libs/streams). */
export interface Deliverer {
  send(
    target: SubscriptionEntity & WebhookTarget,
    frame: EventFrame,
    messageId: string,
    signal?: AbortSignal,
  ): Promise<WebhookResult>;
  /**
   * Events of a batched subscription (`config.batch`) as one delivery: one request to a webhook, one delivery to a
   * stream client (webhook-batch.ts). A deliverer without it cannot deliver batched subscriptions.
   */
  sendBatch?(
    target: SubscriptionEntity & WebhookTarget,
    batch: OutBatch,
    messageId: string,
    signal?: AbortSignal,
  ): Promise<WebhookResult>;
}

export interface DispatchLoopOptions {
  /** How long one fetch may wait at the broker for new records. */
  pollMaxWaitMs: number;
  /** Most records buffered per subscription partition, waiting for delivery. */
  batchMaxEvents: number;
  /** How often the set of subscriptions (and the partitions of their topics) is re-read. */
  refreshIntervalMs: number;
  /**
   * Deliveries out at once in a lane of a subscription with ordering `key` or `none` (its `config.concurrency`
   * overrides it); absent: DEFAULT_LANE_CONCURRENCY (ordering.ts).
   */
  concurrency?: number;
  /** Defaults of the retry policy; a subscription's `config.retry` overrides each. */
  retryInitialMs: number;
  retryMaxMs: number;
  maxAttempts: number;
  /** The circuit breaker of each subscription's sink (circuit-breaker.ts); absent: no breaker, the sink is always tried. */
  breaker?: CircuitBreakerOptions;
  /** Most parked deliveries per subscription; absent: no cap. At the cap a lane holds its failing event (docs/delivery.md). */
  maxParked?: number;
  /** How often a failing sink's further failures are summarised in one line (sink-failure-log.ts); 60 s when absent. */
  sinkFailureSummaryMs?: number;
  /** Longest string a CESQL filter evaluates (EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS); libs/filter's default when absent. */
  filterMaxAttributeChars?: number;
  /** The audit topic, when audit records go to one: each tenant but the operator's gets its own records of it only. */
  tenantRecords?: TenantRecordsTopic;
}

export interface DispatchLoopDeps {
  instanceId: string;
  subscriptions: {
    activeFor(instanceId: string): Promise<SubscriptionEntity[]>;
    /** In the fenced transaction `manager` when given: a stale run's disable changes nothing. */
    disable(id: string, reason: string, manager?: EntityManager): Promise<void>;
  };
  offsets: OffsetStore;
  deadLetters: DeadLetterStore;
  retries: RetryStore;
  /** Where the ranges of events Kafka deleted before delivery are recorded (never silent). */
  skipped: Pick<SkippedRangeStore, 'record'>;
  reader: PartitionReader;
  topics: TopicAdmin;
  sender: Deliverer;
  options: DispatchLoopOptions;
  /**
   * PARTITION_OWNED_PULL: the one partition this loop owns; every subscription of its topic is dispatched there.
   * Absent: every partition of the subscriptions `activeFor` returns (LOCAL_STICKY_PULL).
   */
  scope?: { topic: string; partition: number };
  /**
   * Runs each write of the loop's state (commits, parking, dead letters, forgetting replayed parked rows, a 410's
   * disable): under a partition lease's epoch (PARTITION_OWNED_PULL) or the instance's dispatch run's
   * (LOCAL_STICKY_PULL). A write it refuses stops the loop.
   */
  fence: WriteFence;
  /** While this answers false the loop neither fetches nor starts deliveries (its lease is unconfirmed). */
  gate?: () => boolean;
  /** Hears of each attempt's outcome, parking, dead letter and breaker opening (libs/metrics); absent: metrics are off. */
  metrics?: Pick<RuntimeMetrics, 'attempted' | 'parked' | 'deadLettered' | 'breakerOpened'>;
  /** The instance's running loops (readiness and metrics read them): the loop is in it while it runs. */
  running?: RunningLoops;
}

/** What the parts of one dispatch loop share: its dependencies, its lanes and counts, and its gate and fence. */
export interface DispatchContext {
  readonly deps: DispatchLoopDeps;
  /** Every write of the loop's state runs through it. */
  readonly fence: WriteFence;
  readonly lanes: Lanes;
  readonly progress: DispatchProgress;
  /** The circuit breaker of each subscription's sink. */
  readonly breakers: CircuitBreakers;
  /** False while the gate is shut or after a write was fenced: nothing new starts. */
  gateOpen(): boolean;
  /** Aborted while the gate is shut (a fresh signal once it opens again). */
  gateSignal(): AbortSignal;
  /** True (and the loop stops) when `e` is a refusal for a stale epoch; false for any other error. */
  noteFenced(e: unknown): boolean;
  /** Wakes the loop when a lane finishes or a retry comes due. */
  wake(): void;
}

/** A write refused because a newer owner (of the partition, or of the instance's dispatch run) holds it: the loop must stop. */
export function isFenced(e: unknown): boolean {
  return e instanceof StaleEpochError || e instanceof FencedError;
}

import { defineQuery, defineSignal } from '@temporalio/workflow';

/**
 * Names and shapes of the dead-letter replay workflow (workflows/dlq-replay.workflow.ts) and its activities
 * (activities/dead-letter.activities.ts), and of the selection of dead letters a replay carries (libs/storage).
 */

/**
 * Which dead letters of one subscription a browse, a replay or a purge is about. Every field given narrows the
 * selection; none given selects every dead letter not replayed yet. Plain values only (strings and numbers), so
 * a filter can travel in a replay workflow's input: it names letters, it never carries one.
 */
export interface DeadLetterFilter {
  /** The event's `type`, exactly. */
  type?: string;
  /** The event's `source`, exactly. */
  source?: string;
  /** Dead-lettered at or after this instant (ISO 8601). */
  from?: string;
  /** Dead-lettered before this instant (ISO 8601). */
  to?: string;
  /** Part of the last error, case-insensitive (`timeout`, `ECONNREFUSED`). */
  lastError?: string;
  /** The last attempt was answered with this HTTP status (the last error reads `HTTP <status>`). */
  httpStatus?: number;
  /** `dead` (default): not replayed; `replayed`: delivered by a replay; `all`. */
  state?: DeadLetterState;
}

export const DEAD_LETTER_STATES = ['dead', 'replayed', 'all'] as const;
export type DeadLetterState = (typeof DEAD_LETTER_STATES)[number];

/** What a replay sends again: the letters named by id, or every dead letter matching a filter. */
export type ReplaySelection = { ids: string[] } | { filter: DeadLetterFilter };

export interface DlqReplayInput {
  replayId: string;
  subscriptionId: string;
  selection: ReplaySelection;
  /** The highest letter id when the replay was asked for ('0': none matched). */
  upToId: string;
  /** The letters it covers: dead (not replayed) and matching, when it was asked for. */
  total: number;
  ratePerSecond: number;
  batchSize: number;
  /** The batch activity's heartbeat timeout: how soon a crashed instance's batch moves to another worker. */
  heartbeatTimeoutMs: number;
  requestedAt: string;
  batchesPerRun?: number;
  /** Carried across continue-as-new. */
  progress?: DlqReplayCounts;
}

export interface DlqReplayCounts {
  /** The last letter id a batch covered; the next one starts after it. */
  afterId: string;
  replayed: number;
  failed: number;
  /** Letters of the replay it did not send: replayed or purged by something else first. */
  skipped: number;
  batches: number;
}

export type DlqReplayState = 'RUNNING' | 'COMPLETED' | 'CANCELLED';

export interface DlqReplayProgress {
  replayId: string;
  subscriptionId: string;
  state: DlqReplayState;
  total: number;
  replayed: number;
  failed: number;
  skipped: number;
  remaining: number;
  ratePerSecond: number;
  requestedAt: string;
}

/** The replay workflow's type and signature: a client starts it by this name, without its code. */
export const DLQ_REPLAY_WORKFLOW = 'dlqReplayWorkflow';
export type DlqReplayWorkflow = (input: DlqReplayInput) => Promise<DlqReplayProgress>;

/** The dead letters' retention run, started by its Temporal schedule (apps/worker/src/retention-schedules.ts). */
export const DLQ_RETENTION_WORKFLOW = 'dlqRetentionWorkflow';
export interface RetentionInput {
  /** Older than this many days go (the retention setting of the instance that wrote the schedule). */
  retentionDays: number;
}
export type RetentionWorkflow = (input: RetentionInput) => Promise<{ deleted: number }>;

export const dlqReplayProgressQuery = defineQuery<DlqReplayProgress>('progress');
/** Stops the replay after the batch in flight (a few seconds at most): what it delivered stays delivered. */
export const cancelDlqReplaySignal = defineSignal('cancel');

export interface ReplayBatchInput {
  replayId: string;
  subscriptionId: string;
  selection: ReplaySelection;
  upToId: string;
  /** The batch starts after this letter id. */
  afterId: string;
  limit: number;
  ratePerSecond: number;
}

export interface ReplayBatchResult {
  /** The last letter id this batch covered; absent when it covered none. */
  lastId?: string;
  /** No letter of the replay is left after `lastId`. */
  done: boolean;
  /** Letters of the batch delivered (and marked) by this replay. */
  replayed: number;
  /** Letters of the batch whose replay failed: still dead letters, with the new error. */
  failed: number;
  /** Letters of the batch another replay held. */
  heldElsewhere: number;
}

/** The failure type of a batch stopped by its instance's shutdown: retried, on another worker if there is one. */
export const REPLAY_BATCH_INTERRUPTED = 'ReplayBatchInterrupted';

/** The dead-letter activities (activities/dead-letter.activities.ts), as the replay and retention workflows call them. */
export interface DeadLetterActivities {
  replayDeadLetters(input: ReplayBatchInput): Promise<ReplayBatchResult>;
  purgeExpiredDeadLetters(input: { retentionDays: number }): Promise<number>;
}

import { continueAsNew, isCancellation, proxyActivities, setHandler, upsertMemo } from '@temporalio/workflow';
import {
  cancelDlqReplaySignal,
  DeadLetterActivities,
  DlqReplayCounts,
  DlqReplayInput,
  DlqReplayProgress,
  dlqReplayProgressQuery,
  DlqReplayState,
  ReplayBatchResult,
} from '../contracts';

/**
 * A replay of dead letters to their subscription, id `dlq-replay/<replayId>`, on the dead-letter task queue
 * (any instance's worker). Its history holds letter ids and counts only, never an event: each batch is one
 * activity that claims the next letters after `afterId`, sends them to the subscription's sink at the replay's
 * rate, and marks each one it delivered (libs/storage/dead-letter-replay-store.ts), so a crash mid-batch loses
 * nothing and doubles nothing: the activity is retried (on another worker, or this one restarted) and skips what
 * was marked. Progress is the `progress` query and the `progress` memo (updated after every batch); the
 * `cancel` signal stops it after the batch in flight; a cancellation from the Temporal UI stops it at once. It
 * continues as new every `batchesPerRun` batches.
 */
export async function dlqReplayWorkflow(input: DlqReplayInput): Promise<DlqReplayProgress> {
  const { replayDeadLetters } = proxyActivities<DeadLetterActivities>({
    startToCloseTimeout: '30m',
    heartbeatTimeout: input.heartbeatTimeoutMs,
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
  });
  const counts: DlqReplayCounts = input.progress ?? { afterId: '0', replayed: 0, failed: 0, skipped: 0, batches: 0 };
  let state: DlqReplayState = 'RUNNING';
  let cancelRequested = false;
  const progress = (): DlqReplayProgress => ({
    replayId: input.replayId,
    subscriptionId: input.subscriptionId,
    state,
    total: input.total,
    replayed: counts.replayed,
    failed: counts.failed,
    skipped: counts.skipped,
    remaining: state === 'RUNNING' ? Math.max(0, input.total - counts.replayed - counts.failed - counts.skipped) : 0,
    ratePerSecond: input.ratePerSecond,
    requestedAt: input.requestedAt,
  });
  setHandler(dlqReplayProgressQuery, progress);
  setHandler(cancelDlqReplaySignal, () => {
    cancelRequested = true;
  });

  const batchesPerRun = input.batchesPerRun ?? 100;
  try {
    for (let i = 0; i < batchesPerRun && state === 'RUNNING'; i++) {
      if (cancelRequested) {
        state = 'CANCELLED';
        break;
      }
      const batch: ReplayBatchResult = await replayDeadLetters({
        replayId: input.replayId,
        subscriptionId: input.subscriptionId,
        selection: input.selection,
        upToId: input.upToId,
        afterId: counts.afterId,
        limit: input.batchSize,
        ratePerSecond: input.ratePerSecond,
      });
      counts.replayed += batch.replayed;
      counts.failed += batch.failed;
      counts.skipped += batch.heldElsewhere;
      counts.batches++;
      if (batch.lastId !== undefined) counts.afterId = batch.lastId;
      if (batch.done) state = 'COMPLETED';
      upsertMemo({ progress: progress() });
    }
  } catch (e) {
    if (!isCancellation(e)) throw e;
    state = 'CANCELLED';
  }
  if (state === 'RUNNING') {
    if (cancelRequested) state = 'CANCELLED';
    else await continueAsNew<typeof dlqReplayWorkflow>({ ...input, progress: counts });
  }
  // Letters of the replay it never sent went another way first (another replay, a purge, retention).
  if (state === 'COMPLETED') counts.skipped = Math.max(0, input.total - counts.replayed - counts.failed);
  const final = progress();
  upsertMemo({ progress: final });
  return final;
}

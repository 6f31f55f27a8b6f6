import { randomUUID } from 'node:crypto';
import { Client, WorkflowNotFoundError } from '@temporalio/client';
import type { DataSource } from 'typeorm';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { withDeadline } from '@libs/runtime';
import { DeadLetterReplayStore } from '@libs/storage';
import { DEAD_LETTER_TASK_QUEUE, dlqReplayWorkflowIdOf } from '@libs/temporal';
import {
  cancelDlqReplaySignal,
  DLQ_REPLAY_WORKFLOW,
  DlqReplayInput,
  DlqReplayProgress,
  dlqReplayProgressQuery,
  DlqReplayWorkflow,
} from '../../contracts';
import { parseReplayRequest } from './dead-letter-query';

/** A replay as the API shows it: the workflow's progress, and where to see it in Temporal. */
export interface ReplayView extends Omit<DlqReplayProgress, 'state'> {
  /** RUNNING, COMPLETED or CANCELLED; FAILED or TERMINATED when its workflow ended so (Temporal UI). */
  state: string;
  workflowId: string;
  /** In the answer to a cancel of a running replay: it stops after the batch in flight. */
  cancelRequested?: boolean;
}

/** Letters per batch (one activity): about two seconds of sending at the replay's rate, 1 to 200. */
export const replayBatchSize = (ratePerSecond: number) => Math.min(200, Math.max(1, Math.ceil(ratePerSecond * 2)));

/**
 * Dead-letter replays of a subscription: each is the Temporal workflow `dlq-replay/<replayId>` (workflows/
 * dlq-replay.workflow.ts), started here with the letters it covers (ids, or a filter, up to the highest id now)
 * and read back from it. The caller's tenant is checked on the subscription first; a replay of another
 * subscription answers 404 like a missing one.
 */
export class DeadLetterReplays {
  private readonly log = createLogger('DeadLetterReplays');
  private readonly store: DeadLetterReplayStore;

  constructor(
    db: DataSource,
    private readonly client: Client,
    private readonly subscriptionOf: (id: string, tenant: string) => Promise<unknown>,
    private readonly options: { defaultRatePerSecond: number; heartbeatTimeoutMs: number },
  ) {
    this.store = new DeadLetterReplayStore(db);
  }

  async start(subscriptionId: string, tenant: string, body: unknown): Promise<ReplayView> {
    const request = parseReplayRequest(body);
    await this.subscriptionOf(subscriptionId, tenant);
    const scope = await this.store.scope(subscriptionId, request.selection);
    if (scope.missing.length > 0) {
      throw new EventMeshError(
        ErrorCode.DeadLetterNotFound,
        `subscription ${subscriptionId} has no dead letter ${scope.missing.join(', ')}`,
        {
          field: 'ids',
          missing: scope.missing,
        },
      );
    }
    const ratePerSecond = request.ratePerSecond ?? this.options.defaultRatePerSecond;
    const replayId = randomUUID();
    const input: DlqReplayInput = {
      replayId,
      subscriptionId,
      selection: request.selection,
      upToId: scope.upToId ?? '0',
      total: scope.total,
      ratePerSecond,
      batchSize: replayBatchSize(ratePerSecond),
      heartbeatTimeoutMs: this.options.heartbeatTimeoutMs,
      requestedAt: new Date().toISOString(),
    };
    const progress: DlqReplayProgress = {
      replayId,
      subscriptionId,
      state: 'RUNNING',
      total: scope.total,
      replayed: 0,
      failed: 0,
      skipped: 0,
      remaining: scope.total,
      ratePerSecond,
      requestedAt: input.requestedAt,
    };
    const workflowId = dlqReplayWorkflowIdOf(replayId);
    await this.client.workflow.start<DlqReplayWorkflow>(DLQ_REPLAY_WORKFLOW, {
      workflowId,
      taskQueue: DEAD_LETTER_TASK_QUEUE,
      args: [input],
      memo: { progress },
    });
    this.log.info(
      { subscription: subscriptionId, tenant, replayId, workflowId, total: scope.total, ratePerSecond },
      'dead-letter replay started',
    );
    return { ...progress, workflowId };
  }

  /** A replay's progress: its query while it runs (its memo if no worker answers), its result once it ended. */
  async get(subscriptionId: string, tenant: string, replayId: string): Promise<ReplayView> {
    await this.subscriptionOf(subscriptionId, tenant);
    const workflowId = dlqReplayWorkflowIdOf(replayId);
    const notFound = () =>
      new EventMeshError(ErrorCode.ReplayNotFound, `subscription ${subscriptionId} has no replay ${replayId}`, {
        replayId,
      });
    const handle = this.client.workflow.getHandle(workflowId);
    let progress: DlqReplayProgress | undefined;
    let state: string | undefined;
    try {
      const described = await handle.describe();
      const memo = (described.memo?.progress ?? undefined) as DlqReplayProgress | undefined;
      const status = described.status.name;
      if (status === 'RUNNING') {
        progress = await withDeadline(5000, handle.query(dlqReplayProgressQuery)).catch(() => memo);
      } else if (status === 'COMPLETED') {
        progress = await withDeadline(5000, handle.result() as Promise<DlqReplayProgress>).catch(() => memo);
      } else {
        progress = memo;
        state = status;
      }
    } catch (e) {
      if (e instanceof WorkflowNotFoundError) throw notFound();
      throw e;
    }
    if (!progress || progress.subscriptionId !== subscriptionId) throw notFound();
    return { ...progress, state: state ?? progress.state, workflowId };
  }

  /**
   * Asks the replay to stop after the batch in flight (the `cancel` signal); what it delivered stays delivered.
   * A replay that already ended is answered as it is.
   */
  async cancel(subscriptionId: string, tenant: string, replayId: string): Promise<ReplayView> {
    const current = await this.get(subscriptionId, tenant, replayId);
    if (current.state !== 'RUNNING') return current;
    await this.client.workflow.getHandle(current.workflowId).signal(cancelDlqReplaySignal);
    this.log.info({ subscription: subscriptionId, tenant, replayId }, 'dead-letter replay cancel requested');
    return { ...current, cancelRequested: true };
  }
}

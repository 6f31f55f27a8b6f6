import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import {
  NotATaskFrame,
  RequestRecordGone,
  TaskChangeNotices,
  type FirstAttempts,
  type TaskChangeSignals,
  type TaskPusher,
  type TaskRelay,
} from '@libs/a2a';
import type { A2ATaskActivities, CancelOutcome, PushOutcome, TaskIds, TaskRequestRecord, TaskStep } from '../contracts';

export interface A2ATaskActivityDeps {
  relay: TaskRelay;
  /** The first attempts the gateway of this process began (libs/a2a/relay/first-attempts.ts): a local activity adopts its own. */
  firstAttempts?: FirstAttempts;
  /** Pushes a task's updates to its push notification configs. */
  pusher: TaskPusher;
  /** Aborted when the instance shuts down: a delivery stops at once and Temporal runs it again on another instance. */
  shutdownSignal: AbortSignal;
  /** Tells a task's workflow of each change a delivery (an activity) records, so the delivery follows on. */
  changes: TaskChangeSignals;
  /** One retention purge of the tasks that ended (RetentionPurge over A2ATaskStore); `retentionDays` from the schedule's input. */
  purgeExpiredTasks: (retentionDays: number) => Promise<number>;
}

/** How long a delivery that ends waits for its last change to be signalled, so that its workflow sees it first. */
const LAST_SIGNAL_WAIT_MS = 5000;

/** How often a delivery heartbeats (so a cancel of the task reaches it soon, and a dead worker is noticed). */
const HEARTBEAT_MS = 1000;

/**
 * The steps of an A2A task's workflow (workflows/a2a-task.workflow.ts), each one call of the task relay
 * (libs/a2a/relay/task-relay.ts). They take and return ids and states only: what the agent is sent is read from the
 * agent's request topic, what it answers is written to Postgres. Failures to reach the agent, Kafka or Postgres are
 * thrown for Temporal to retry (within the task's timeout).
 */
export function createA2ATaskActivities(deps: A2ATaskActivityDeps): A2ATaskActivities {
  return {
    async deliverTask(
      input: TaskIds & { request?: TaskRequestRecord; callTimeoutMs: number; turn?: number },
    ): Promise<TaskStep> {
      const ctx = Context.current();
      // The first heartbeat a second in, not at once: a delivery that ends sooner (most: the agent answers at once)
      // costs Temporal no heartbeat call; a cancel reaches a longer one at its next heartbeat. A local activity
      // (a task's first attempt, run within its workflow task) has no heartbeat: a cancel reaches it directly.
      const beat = ctx.info.isLocal ? undefined : setInterval(() => ctx.heartbeat(), HEARTBEAT_MS);
      const { request, callTimeoutMs, turn, ...ids } = input;
      // A delivery as an activity tells its workflow of each change and follows the task to the end; the first
      // attempt (local: its workflow cannot hear a signal before it answers) follows for a moment and answers.
      const notices = ctx.info.isLocal ? undefined : new TaskChangeNotices(ids.taskId, deps.changes);
      let lastSignalWaitMs = 0;
      try {
        const signal = AbortSignal.any([ctx.cancellationSignal, deps.shutdownSignal]);
        // A turn's first attempt (the local activity) may be under way already, begun by the gateway of this process
        // as the workflow started here (or about to be): its outcome is this activity's, and the turn is not sent twice.
        const deliver = () =>
          deps.relay.deliver(
            ids,
            request,
            { signal, callTimeoutMs, onChange: notices && ((task) => notices.changed(task)) },
            turn,
          );
        const state = await (ctx.info.isLocal && deps.firstAttempts
          ? deps.firstAttempts.run(ids.taskId, turn ?? 1, signal, deliver)
          : deliver());
        lastSignalWaitMs = LAST_SIGNAL_WAIT_MS;
        return { state };
      } catch (e) {
        // A request that cannot be read as a task, or is gone from Kafka, never will be: the task fails.
        if (e instanceof RequestRecordGone || e instanceof NotATaskFrame)
          throw ApplicationFailure.nonRetryable((e as Error).message, 'UndeliverableTask');
        throw e;
      } finally {
        clearInterval(beat);
        // Answered: the last change is signalled first (the workflow sees the signal, then the answer). Failed: the
        // next attempt tells its own.
        await notices?.close(lastSignalWaitMs);
      }
    },

    /** Pushes the task as it is now to each of its push notification configs that has not had this version yet. */
    async pushTask(ids: TaskIds): Promise<PushOutcome> {
      const ctx = Context.current();
      ctx.heartbeat();
      const beat = setInterval(() => ctx.heartbeat(), HEARTBEAT_MS);
      try {
        return await deps.pusher.push(ids, AbortSignal.any([ctx.cancellationSignal, deps.shutdownSignal]));
      } finally {
        clearInterval(beat);
      }
    },

    async cancelTask(ids: TaskIds): Promise<CancelOutcome> {
      return deps.relay.cancel(ids);
    },

    /** The retention's purge (workflows/a2a-task-retention.workflow.ts): how many tasks it deleted. */
    async purgeExpiredTasks(input: { retentionDays: number }): Promise<number> {
      return deps.purgeExpiredTasks(input.retentionDays);
    },

    async failTask(input: TaskIds & { reason: string }): Promise<TaskStep> {
      const { reason, ...ids } = input;
      return { state: (await deps.relay.fail(ids, reason)).state };
    },
  };
}

import { ActivityFailure, ActivityOptions, ApplicationFailure, RetryState } from '@temporalio/common';
import {
  allHandlersFinished,
  CancellationScope,
  condition,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { A2ATaskActivities } from '../contracts';
import {
  A2ATaskCancelInput,
  A2ATaskInput,
  a2aSearchAttributes,
  CancelOutcome,
  cancelTaskUpdate,
  pushConfiguredSignal,
  DEFAULT_DELIVERY_RETRY,
  firstAttemptTimeoutMs,
  SETTLED_STATES,
  taskChangedSignal,
  TaskStateName,
  taskStateQuery,
} from '../contracts';

const settled = (state: TaskStateName) => SETTLED_STATES.includes(state);
/** The mesh's own steps (Postgres writes, a cancel at the agent): tried again until they succeed. */
const retry = { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '5s' } as const;
/** The push of a task's change (an hour of failures to reach Postgres at most; the next change pushes again). */
const pushOptions: ActivityOptions = { scheduleToCloseTimeout: '1 hour', heartbeatTimeout: '10s', retry };

/** What an activity's failure says: its cause's message. */
const reasonOf = (e: unknown): string =>
  e instanceof ActivityFailure ? (e.cause?.message ?? e.message) : (e as Error).message;

/**
 * One per A2A task, id `a2a-task/<taskId>`, on the shared A2A task queue (any instance runs it). The gateway took
 * the task: the row is in Postgres (`submitted`) and its request is a record on the agent's request topic. This
 * workflow sees it to a settled state (terminal, or waiting for the client) within the task's timeout:
 * - an agent at a URL: the delivery activity reads the record from Kafka, sends it to the agent as an A2A client
 *   and follows the agent's task until it settles, recording each change with a compare-and-set. An agent that
 *   cannot be reached is tried again with backoff (Temporal's retry, as the agent's retry policy says), so a task
 *   for an agent that is down waits for it, durably, until the timeout or the policy's last attempt;
 * - a mesh subscriber: the agent's subscription delivers the record; the agent's updates are recorded by the
 *   gateway, which signals each change here.
 * A cancel is an update: it stops the delivery, cancels at the agent and in Postgres, and answers how it went.
 * A delivery run as an activity signals each change it records (`changed`, as a mesh subscriber's updates are)
 * and follows on, never ceasing to listen to the agent: the workflow records the state and pushes the change.
 * A task with push notification configs (given with the send, or set later: a signal) has each change the workflow
 * sees pushed by an activity (libs/a2a/push/task-pushes.ts) that reads the task and its configs from Postgres, beside the
 * delivery; the workflow ends once every change is pushed.
 * At the timeout the task fails (and the agent is asked to cancel its task). Only ids and states are in the
 * history; the state is also a search attribute (`EventMeshTaskState`, beside `EventMeshAgent` and
 * `EventMeshTenant` set at the start), so operators filter tasks in the Temporal UI. The task's deadline bounds each
 * delivery as the activity's own schedule-to-close timeout (no timer per delivery).
 */
export async function a2aTaskWorkflowV2(input: A2ATaskInput): Promise<TaskStateName> {
  return runTask(input, { pushable: true, deadlineAsTimeout: true, firstAttemptLocal: true });
}

/**
 * The type of the task workflows started before {@link a2aTaskWorkflowV2}: no longer started, kept so that the
 * runs of that type still open go on and their histories replay. It bounds each delivery with a timer (a
 * cancellation scope's timeout), and pushes notifications only in runs that recorded the `a2a-push-notifications`
 * patch. A new type rather than another patch: a patch is a marker and a search attribute upsert in every run.
 */
export async function a2aTaskWorkflow(input: A2ATaskInput): Promise<TaskStateName> {
  // Histories recorded before push notifications replay without them.
  return runTask(input, {
    pushable: patched('a2a-push-notifications'),
    deadlineAsTimeout: false,
    firstAttemptLocal: false,
  });
}

/**
 * A cancel of a task whose workflow ended because the task waits for the client (`input-required`,
 * `auth-required`): a run of `a2a-task/<taskId>` of its own, started by the gateway together with the cancel update
 * (update-with-start; a run of the task still going gets the update instead). It cancels at the agent and in
 * Postgres, as a running task's cancel does, then pushes the change to the task's push notification configs (none:
 * nothing is sent), and ends. Only ids and states in its history.
 */
export async function a2aTaskCancelWorkflow(input: A2ATaskCancelInput): Promise<TaskStateName> {
  const ids = { taskId: input.taskId, tenant: input.tenant, agent: input.agent };
  // Tried again, as every step, but within a bound: a client waits for this answer (a running task's cancel waits
  // on its delivery's end too, this one on nothing else).
  const attemptMs = input.callTimeoutMs + 10_000;
  const steps = proxyActivities<A2ATaskActivities>({
    startToCloseTimeout: attemptMs,
    scheduleToCloseTimeout: 3 * attemptMs,
    retry,
  });
  const pushes = proxyActivities<A2ATaskActivities>(pushOptions);
  let state = input.state;
  let cancel: Promise<CancelOutcome> | undefined;
  const cancelOnce = async (): Promise<CancelOutcome> => {
    try {
      return await steps.cancelTask(ids);
    } catch (e) {
      return {
        outcome: 'unreachable',
        reason: `the cancel could not be made within ${3 * attemptMs} ms: ${reasonOf(e)}`,
      };
    }
  };
  setHandler(taskStateQuery, () => state);
  // A second cancel while the first runs answers as the first does.
  setHandler(cancelTaskUpdate, () => (cancel ??= cancelOnce()));
  await condition(() => cancel !== undefined);
  const outcome = await cancel!;
  if (outcome.state && outcome.state !== state) {
    state = outcome.state;
    upsertSearchAttributes([{ key: a2aSearchAttributes.state, value: state }]);
  }
  if (outcome.outcome === 'canceled') {
    try {
      await pushes.pushTask(ids);
    } catch {
      // Given up by Temporal (an hour of failures to reach Postgres), as a running task's pusher gives up.
    }
  }
  await condition(allHandlersFinished);
  return state;
}

/** How each type runs a task (see the types above). */
interface TaskRunMode {
  /** Push notifications are sent for tasks with push configs. */
  pushable: boolean;
  /** The deadline is each delivery's schedule-to-close timeout (else a timer per delivery). */
  deadlineAsTimeout: boolean;
  /**
   * An agent at a URL: the turn's first delivery attempt is a local activity, run by the worker within the first
   * workflow task (no activity task through Temporal); it sends the request and follows the agent's task for a
   * moment (libs/a2a/relay/task-relay.ts), which is all most tasks need. What it leaves (a failure to reach the agent, a
   * task still running) goes on in deliveries as activities, with the agent's retry policy less the attempt made.
   */
  firstAttemptLocal: boolean;
}

/** The patch of the wait between a failed local first attempt and the delivery activity that tries again. */
const LOCAL_ATTEMPT_BACKOFF = 'a2a-local-attempt-backoff';
/** The patch of the check that a change of a running task, signalled after the task settled, is ignored. */
const LATE_CHANGE_IGNORED = 'a2a-late-change-ignored';

async function runTask(
  input: A2ATaskInput,
  { pushable, deadlineAsTimeout, firstAttemptLocal }: TaskRunMode,
): Promise<TaskStateName> {
  const ids = { taskId: input.taskId, tenant: input.tenant, agent: input.agent };
  const deadline = Date.now() + input.timeoutMs;
  const steps = proxyActivities<A2ATaskActivities>({ startToCloseTimeout: input.callTimeoutMs + 10_000, retry });
  // The agent's retry policy (its card's task-policy extension, libs/a2a/agents/task-policy.ts), else the default.
  const agentRetry = input.retry ?? DEFAULT_DELIVERY_RETRY;
  const deliveryOptions: ActivityOptions = {
    startToCloseTimeout: input.timeoutMs,
    // A delivery heartbeats at least once a second; its calls to the agent last at most callTimeoutMs.
    heartbeatTimeout: input.callTimeoutMs + 10_000,
    retry: {
      initialInterval: agentRetry.initialIntervalMs,
      backoffCoefficient: agentRetry.backoffCoefficient,
      maximumInterval: agentRetry.maximumIntervalMs,
      ...(agentRetry.maximumAttempts > 0 ? { maximumAttempts: agentRetry.maximumAttempts } : {}),
    },
  };
  const delivering = proxyActivities<A2ATaskActivities>(deliveryOptions);

  const pushes = proxyActivities<A2ATaskActivities>(pushOptions);

  const turn = input.turn ?? 1;
  let state: TaskStateName = turn > 1 ? 'working' : 'submitted';
  let version = 0;
  let cancelling = false;
  let delivery: CancellationScope | undefined;
  const settle = (next: TaskStateName) => {
    if (next === state) return;
    state = next;
    upsertSearchAttributes([{ key: a2aSearchAttributes.state, value: state }]);
  };

  // Push notifications: `changes` counts the changes seen, `pushedChanges` those pushed; the pusher runs beside the rest.
  let pushing = pushable && input.push === true;
  let changes = 0;
  let pushedChanges = 0;
  let ended = false;
  const changed = () => {
    changes++;
  };
  const pusher = (async () => {
    for (;;) {
      await condition(() => (pushing && changes > pushedChanges) || (ended && allHandlersFinished()));
      if (!(pushing && changes > pushedChanges)) return;
      const upTo = changes;
      try {
        await pushes.pushTask(ids);
      } catch {
        // Given up by Temporal (an hour of failures to reach Postgres): the next change pushes the task again.
      }
      pushedChanges = upTo;
    }
  })();

  setHandler(taskStateQuery, () => state);
  setHandler(taskChangedSignal, (next) => {
    if (next.version <= version) return; // an older change, arrived late
    // A change of a task still running, told after the task settled (the delivery that recorded it was canceled
    // with its signal in flight, or timed out waiting for it): the settled state stands. Runs recorded before this
    // check replay without it.
    if (settled(state) && !settled(next.state) && patched(LATE_CHANGE_IGNORED)) return;
    version = next.version;
    settle(next.state);
    changed();
  });
  setHandler(pushConfiguredSignal, () => {
    if (!pushable) return;
    pushing = true;
    changed();
  });
  setHandler(cancelTaskUpdate, async () => {
    cancelling = true;
    try {
      delivery?.cancel();
      const outcome = await steps.cancelTask(ids);
      if (outcome.state) settle(outcome.state);
      changed();
      return outcome;
    } finally {
      cancelling = false;
    }
  });

  const deliveryOf = () => ({
    ...ids,
    request: input.request,
    callTimeoutMs: input.callTimeoutMs,
    ...(turn > 1 ? { turn } : {}),
  });
  const failed = async (e: unknown) => {
    settle((await steps.failTask({ ...ids, reason: `the delivery to the agent failed: ${reasonOf(e)}` })).state);
    changed();
  };

  if (input.style === 'url') {
    // Attempts at the agent left to the deliveries as activities (0: no limit but the deadline).
    let attemptsLeft = agentRetry.maximumAttempts;
    let retryAfterLocal = false;
    if (firstAttemptLocal) {
      delivery = new CancellationScope({ cancellable: true });
      try {
        const first = proxyLocalActivities<A2ATaskActivities>({
          scheduleToCloseTimeout: Math.max(
            1,
            Math.min(deadline - Date.now(), firstAttemptTimeoutMs(input.callTimeoutMs)),
          ),
          retry: { maximumAttempts: 1 },
        });
        settle((await delivery.run(() => first.deliverTask(deliveryOf()))).state);
        changed();
      } catch (e) {
        if (!isCancellation(e)) {
          const undeliverable =
            e instanceof ActivityFailure && e.cause instanceof ApplicationFailure && e.cause.nonRetryable;
          if (undeliverable || attemptsLeft === 1) await failed(e);
          else {
            if (attemptsLeft > 1) attemptsLeft--;
            retryAfterLocal = true;
          }
        }
      } finally {
        delivery = undefined;
      }
      // The next attempt waits the policy's first interval, as Temporal's retry does between attempts (a cancel or a
      // change ends the wait). Runs recorded before this wait replay without it.
      if (retryAfterLocal && !settled(state) && patched(LOCAL_ATTEMPT_BACKOFF)) {
        await condition(
          () => settled(state) || cancelling,
          Math.max(1, Math.min(agentRetry.initialIntervalMs, deadline - Date.now())),
        );
      }
    }
    while (!settled(state) && Date.now() < deadline) {
      await condition(() => !cancelling);
      if (settled(state)) break;
      const left = deadline - Date.now();
      delivery = new CancellationScope({ cancellable: true, ...(deadlineAsTimeout ? {} : { timeout: left }) });
      const retry = { ...deliveryOptions.retry, ...(attemptsLeft > 0 ? { maximumAttempts: attemptsLeft } : {}) };
      const deliverer = deadlineAsTimeout
        ? proxyActivities<A2ATaskActivities>({ ...deliveryOptions, retry, scheduleToCloseTimeout: left })
        : delivering;
      try {
        settle((await delivery.run(() => deliverer.deliverTask(deliveryOf()))).state);
        changed();
      } catch (e) {
        if (isCancellation(e)) continue; // a cancel (the update decides), or the deadline (the loop ends)
        // The deadline, as the activity's timeout, or its retries stopped because no further attempt fits before
        // it: the task fails below, at its deadline (a cancel may still come until then).
        if (
          deadlineAsTimeout &&
          (Date.now() >= deadline || (e instanceof ActivityFailure && e.retryState === RetryState.TIMEOUT))
        ) {
          await condition(() => settled(state), Math.max(0, deadline - Date.now()));
          break;
        }
        await failed(e);
      } finally {
        delivery = undefined;
      }
    }
  } else {
    await condition(() => settled(state) && !cancelling, Math.max(0, deadline - Date.now()));
  }
  // Each wait below only when it can matter: a condition costs the worker about 0.1 ms (the SDK records a stack trace
  // for each promise a workflow makes), and most tasks end settled, with no cancel under way and no handler still
  // running. Skipped, neither wait moves a command: what follows them issues none until the workflow completes (the
  // fail of a task that did not settle is a command, so that path waits as before), and the pusher issues its own
  // as it did. Histories replay the same (test/replay).
  if (cancelling || !settled(state)) await condition(() => !cancelling);
  if (!settled(state)) {
    settle(
      (await steps.failTask({ ...ids, reason: `the task did not settle within its timeout of ${input.timeoutMs} ms` }))
        .state,
    );
    changed();
  }
  if (!allHandlersFinished()) await condition(allHandlersFinished);
  // A task that was never pushable (most) ends without waking its pusher, which has pushed nothing and never will:
  // woken, it would cost the last activation one more pass of the worker's conditions (a call into the workflow's
  // sandbox, test/workflows). Its wait is left pending as the run completes; it issues no command either way, so
  // histories replay the same.
  if (!pushing) return state;
  ended = true;
  await pusher;
  return state;
}

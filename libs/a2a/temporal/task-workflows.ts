import {
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  type Client,
} from '@temporalio/client';
import {
  A2A_TASK_QUEUE,
  A2A_TASK_CANCEL_WORKFLOW,
  A2A_TASK_WORKFLOW,
  A2ATaskCancelWorkflow,
  A2ATaskWorkflow,
  a2aSearchAttributes,
  a2aTaskWorkflowIdOf,
  CancelOutcome,
  cancelTaskUpdate,
  pushConfiguredSignal,
  taskChangedSignal,
  TaskRequestRecord,
} from '../../../contracts';
import type { A2AState } from '../tasks/task-states';
import { TaskPolicy, taskPolicyOf } from '../agents/task-policy';
import type { RegisteredCard } from '../agents/agent-card';
import type { EventFrame } from '@libs/frame';
import type { StoredAgent } from '../agents/agent-store';
import type { FirstAttempts } from '../relay/first-attempts';
import type { ParkedStreams } from '../relay/parked-streams';
import type { RequestHandoff } from '../relay/request-handoff';
import type { TaskEventPublisher } from '../tasks/task-event-publisher';
import type { TaskSettlements } from '../tasks/task-settlements';
import type { StoredTask } from '../tasks/task-store';
import type { TaskIds } from '../../../contracts';

/** How long a continuing turn waits for the run of the turn before to end (it settled, and is returning). */
const RUN_ENDING_WAIT_MS = 5000;
/**
 * How long a blocking send waits for this process's worker alone before it also long-polls the workflow's result:
 * about a first delivery attempt (a send and a moment of following). A task that a worker elsewhere settles sooner
 * is answered up to this much late.
 */
const LOCAL_NEWS_GRACE_MS = 1000;

export interface TaskWorkflowOptions {
  /** A task's deadline (EVENTMESH_AGENTS_TASK_TIMEOUT_MS). */
  timeoutMs: number;
  /** One call to an agent (EVENTMESH_AGENTS_CALL_TIMEOUT_MS). */
  callTimeoutMs: number;
  /** The A2A worker of the same process, if it runs one (WorkerHost.a2a). */
  worker?: LocalA2AWorker;
}

/** The A2A worker of the gateway's own process (apps/worker/src/worker-host.ts). */
export interface LocalA2AWorker {
  /**
   * A client on the worker's own connection: a workflow started through it with eager start has its first workflow
   * task handed back in the start call's answer and run by that worker at once, not through the task queue.
   */
  client: Client;
  /** Whether the worker still runs (its connection closes when it stops). */
  running(): boolean;
  /** News of the tasks the worker settled, for a blocking send to answer at once (task-settlements.ts). */
  settlements: TaskSettlements;
  /** The worker's publisher of task events: the gateway of the same process publishes through it (one run per task). */
  events?: TaskEventPublisher;
  /** The requests the gateway of the same process hands to the worker's deliveries (request-handoff.ts). */
  requests?: RequestHandoff;
  /** The turns' first attempts the gateway of the same process begins, for the worker's local activities to adopt. */
  firstAttempts?: FirstAttempts;
  /** The agents' streams the worker's first attempts leave for the deliveries after them (/health `a2aParkedStreams`). */
  parkedStreams?: ParkedStreams;
}

/** A turn's first attempt as the gateway holds it between its announcement and the workflow's start. */
export interface AnnouncedAttempt {
  /** Begins it: the workflow started eagerly on this process's worker, and `task` is written. */
  begin(task: StoredTask, frame: EventFrame, turn: { request?: TaskRequestRecord }): void;
  /** Withdraws it unless it began (the local activity then delivers itself). */
  end(): void;
}

/**
 * The gateway's side of the task workflows (workflows/a2a-task.workflow.ts): starts `a2a-task/<taskId>` with the
 * task's ids, its agent's style and task policy, the record of its request, and the search attributes operators filter on;
 * waits for one to settle; sends it a cancel (an update) or a change (a signal).
 */
export class TaskWorkflows {
  /** Workflows started by this process, and how many of them the server started eagerly on its worker (/health). */
  readonly starts = { total: 0, eager: 0 };

  constructor(
    private readonly client: Client,
    private readonly options: TaskWorkflowOptions,
  ) {}

  /** The first attempts begun here for this process's worker, and those its local activities adopted, if it runs one. */
  firstAttempts(): { begun: number; adopted: number; refused: number; held: number } | undefined {
    return this.options.worker?.firstAttempts?.stats();
  }

  /** The requests handed to this process's worker's deliveries, and those they took, if it runs one. */
  requestHandoff(): { handed: number; taken: number; held: number } | undefined {
    return this.options.worker?.requests?.stats();
  }

  /** The task events publisher of this process's worker, if it runs one. */
  localEvents(): TaskEventPublisher | undefined {
    return this.options.worker?.events;
  }

  /** The task policy of an agent of this card (task-policy.ts): its extension's, on top of the configured timeout. */
  policyOf(card: RegisteredCard): TaskPolicy {
    return taskPolicyOf(card, this.options.timeoutMs);
  }

  /**
   * Starts the task's workflow for the client's turn `turn`: 1, the task's first message (a workflow id never used);
   * more, a message continuing the task after the agent asked for input: a new run of the same workflow id, once the
   * run of the turn before has ended (it ends when the task settles; a run still finishing is waited for, bounded).
   * `agent`: as the gateway read it, whose card's task-policy extension (task-policy.ts) sets the task's timeout and
   * delivery retry; `request`: where the turn's request is in Kafka (absent: the task's row says, once written);
   * `push`: the task has push notification configs. Answers whether the server started it eagerly on this process's
   * worker (its first workflow task runs here: the gateway may begin its first attempt, first-attempts.ts).
   */
  async start(
    task: TaskIds,
    agent: StoredAgent,
    request: TaskRequestRecord | undefined,
    { turn = 1, push = false }: { turn?: number; push?: boolean } = {},
  ): Promise<boolean> {
    const { style, card } = agent;
    const policy = this.policyOf(card);
    // A continuing turn: the task settled before (it asked for input), and settles anew.
    this.options.worker?.settlements.forget(task.taskId);
    const startWith = (client: Client, eager: boolean) =>
      client.workflow.start<A2ATaskWorkflow>(A2A_TASK_WORKFLOW, {
        workflowId: a2aTaskWorkflowIdOf(task.taskId),
        taskQueue: A2A_TASK_QUEUE,
        args: [
          {
            taskId: task.taskId,
            tenant: task.tenant,
            agent: task.agent,
            style,
            ...(request ? { request } : {}),
            timeoutMs: policy.timeoutMs,
            callTimeoutMs: this.options.callTimeoutMs,
            retry: policy.retry,
            ...(turn > 1 ? { turn } : {}),
            ...(push ? { push } : {}),
          },
        ],
        typedSearchAttributes: [
          { key: a2aSearchAttributes.agent, value: task.agent },
          { key: a2aSearchAttributes.tenant, value: task.tenant },
          { key: a2aSearchAttributes.state, value: turn > 1 ? 'working' : 'submitted' },
        ],
        ...(eager ? { requestEagerStart: true } : {}),
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: turn > 1 ? 'ALLOW_DUPLICATE' : 'REJECT_DUPLICATE',
      });
    const start = async (): Promise<boolean> => {
      const local = this.options.worker;
      if (local?.running()) {
        try {
          const handle = await startWith(local.client, true);
          this.starts.total++;
          if (handle.eagerlyStarted) this.starts.eager++;
          return handle.eagerlyStarted;
        } catch (e) {
          if (local.running()) throw e; // else the worker stopped meanwhile: through the gateway's client
        }
      }
      await startWith(this.client, false);
      this.starts.total++;
      return false;
    };
    try {
      return await start();
    } catch (e) {
      if (turn === 1 || !(e instanceof WorkflowExecutionAlreadyStartedError)) throw e;
      await this.waitSettled(task.taskId, RUN_ENDING_WAIT_MS);
      return await start();
    }
  }

  /**
   * Ends the workflow of a task the gateway could not take (its request record or its row was not written while the
   * workflow started): terminated, best effort. One left running (Temporal unreachable) finds no row to deliver and
   * fails the task at its deadline.
   */
  async abandon(taskId: string, reason: string): Promise<void> {
    await this.client.workflow
      .getHandle(a2aTaskWorkflowIdOf(taskId))
      .terminate(reason)
      .catch(() => undefined);
  }

  /**
   * Announces the first attempt of a task's turn (first-attempts.ts) before its workflow starts, for an agent at a
   * URL when this process runs a worker: its local activity then waits for the attempt. Undefined when none is
   * announced (the local activity delivers itself). The caller begins it once the workflow started eagerly here and
   * the task is written, and ends it either way: an attempt not begun is withdrawn.
   */
  announceFirstAttempt(agent: StoredAgent, task: TaskIds, turn: number): AnnouncedAttempt | undefined {
    const local = this.options.worker;
    const attempts = agent.style === 'url' && local?.running() ? local.firstAttempts : undefined;
    if (!attempts?.expect(task.taskId, turn)) return undefined;
    let begun = false;
    return {
      begin: (stored, frame, { request }) => {
        begun = true;
        // The attempt has the frame: the one handed off for this record is not left for another delivery to take.
        const record = request ?? stored.requestRecord;
        if (record) local!.requests?.take(record);
        attempts.begin({
          ids: task,
          turn,
          request,
          frame,
          callTimeoutMs: this.options.callTimeoutMs,
          timeoutMs: this.policyOf(agent.card).timeoutMs,
          task: stored,
          agent,
        });
      },
      end: () => {
        if (!begun) attempts.withdraw(task.taskId, turn);
      },
    };
  }

  /** Hands a request as written to this process's worker, for a delivery there to take instead of reading Kafka. */
  handOff(record: TaskRequestRecord, frame: EventFrame): void {
    if (this.options.worker?.running()) this.options.worker.requests?.put(record, frame);
  }

  /**
   * Resolves when the task's workflow ended (the task settled), or after `boundMs`, whichever comes first (with
   * `orSettledHere`, also when this process's worker settled the task: a blocking send, answered the task as
   * committed when this process committed it); never rejects. The long poll of the result is aborted at the bound, so
   * a send that stopped waiting leaves no call behind.
   */
  async waitSettled(
    taskId: string,
    boundMs: number,
    { orSettledHere = false }: { orSettledHere?: boolean } = {},
  ): Promise<StoredTask | undefined> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), boundMs);
    let grace: NodeJS.Timeout | undefined;
    const ended = () =>
      this.client.connection
        .withAbortSignal(controller.signal, () => this.client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).result())
        // The bound, or a workflow that failed or was terminated, or Temporal unreachable: the caller answers the
        // task as recorded in Postgres, whichever it was.
        .then(
          () => undefined,
          () => undefined,
        );
    try {
      const local = orSettledHere ? this.options.worker : undefined;
      if (!local) return await ended();
      // With eager start this process's worker usually delivers the task: its news (task-settlements.ts, which also
      // resolves at the bound) is waited for alone at first, and the workflow's result is long-polled only for a
      // task not settled here within LOCAL_NEWS_GRACE_MS: no Temporal call per send for a task done at once.
      const here = local.settlements.wait(taskId, controller.signal).then((task) => ({ task }));
      const late = new Promise<undefined>(
        (resolve) => (grace = setTimeout(() => resolve(undefined), LOCAL_NEWS_GRACE_MS)),
      );
      const news = await Promise.race([here, late]);
      if (news) return news.task;
      return (await Promise.race([here, ended()]))?.task;
    } finally {
      clearTimeout(timer);
      clearTimeout(grace);
      controller.abort(); // the long poll of a result no longer waited for
    }
  }

  /** The cancel, through the task's workflow; `not-running` when it ended (the task settled) or never ran. */
  async cancel(taskId: string): Promise<CancelOutcome | 'not-running'> {
    try {
      return await this.client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).executeUpdate(cancelTaskUpdate);
    } catch (e) {
      if (e instanceof WorkflowNotFoundError || isCompleted(e)) return 'not-running';
      throw e;
    }
  }

  /**
   * The cancel of a task whose workflow ended (it waits for the client): a run of `a2a-task/<taskId>` of its own
   * (a2aTaskCancelWorkflow), started with the cancel update in one call (update-with-start), so that the cancel is
   * made, and pushed, by a workflow like every other change; a run of the task that started meanwhile (a new turn)
   * gets the update instead.
   */
  async cancelEnded(task: StoredTask): Promise<CancelOutcome> {
    return this.client.workflow.executeUpdateWithStart(cancelTaskUpdate, {
      startWorkflowOperation: new WithStartWorkflowOperation<A2ATaskCancelWorkflow>(A2A_TASK_CANCEL_WORKFLOW, {
        workflowId: a2aTaskWorkflowIdOf(task.id),
        taskQueue: A2A_TASK_QUEUE,
        args: [
          {
            taskId: task.id,
            tenant: task.tenant,
            agent: task.agent,
            state: task.state,
            callTimeoutMs: this.options.callTimeoutMs,
          },
        ],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: [
          { key: a2aSearchAttributes.agent, value: task.agent },
          { key: a2aSearchAttributes.tenant, value: task.tenant },
          { key: a2aSearchAttributes.state, value: task.state },
        ],
      }),
    });
  }

  /** Tells the task's workflow of a change recorded by someone else (a mesh-subscriber agent's update). */
  changed(taskId: string, state: A2AState, version: number): Promise<void> {
    return signalTaskChanged(this.client, taskId, state, version);
  }

  /** Tells the task's workflow a push notification config was set (it pushes from then on); a workflow that ended has nothing to push. */
  async pushConfigured(taskId: string): Promise<void> {
    try {
      await this.client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).signal(pushConfiguredSignal);
    } catch (e) {
      if (!(e instanceof WorkflowNotFoundError) && !isCompleted(e)) throw e;
    }
  }
}

/**
 * Tells the task's workflow of a change recorded in Postgres (the `changed` signal: ids, state, version), by a
 * mesh subscriber's update or by a delivery that follows on; a workflow that ended has nothing to follow.
 */
export async function signalTaskChanged(
  client: Client,
  taskId: string,
  state: A2AState,
  version: number,
): Promise<void> {
  try {
    await client.workflow.getHandle(a2aTaskWorkflowIdOf(taskId)).signal(taskChangedSignal, { state, version });
  } catch (e) {
    // A workflow that ended (the task settled before, e.g. input-required) has nothing to follow.
    if (!(e instanceof WorkflowNotFoundError) && !isCompleted(e)) throw e;
  }
}

/** An update sent to a workflow that already ended. */
function isCompleted(e: unknown): boolean {
  return /workflow execution already completed|already completed/i.test((e as Error)?.message ?? '');
}

import { Message, SendMessageRequest, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { A2AError, TaskNotCancelableError, TaskNotFoundError } from '@a2a-js/sdk/errors';
import type { EventFrame } from '@libs/frame';
import { createLogger } from '@libs/logging';
import type { CancelOutcome, TaskIds, TaskRequestRecord } from '../../../contracts';
import { cancelToFrame, NotATaskFrame, taskFromFrame } from '../protocol/a2a-frame.adaptor';
import type { AgentClients } from './agent-clients';
import { ParkedStreams } from './parked-streams';
import { AgentStream, isNotAnEventStream } from './agent-stream';
import {
  agentMessage,
  AgentTaskFollower,
  changeOf,
  FOLLOW_FIRST_MS,
  FOLLOW_INLINE_FIRST_MS,
  FOLLOW_INLINE_MS,
  FollowContext,
  invalidAnswer,
  invalidAnswerOf,
  unreachable,
} from './agent-task-follower';
import { isInvalidAnswer } from './invalid-answers';
import type { A2AAgentStore, StoredAgent } from '../agents/agent-store';
import { requestTopicOf } from './request-topic';
import { A2AState, SETTLED, stateOf, TERMINAL } from '../tasks/task-states';
import type { A2ATaskStore, StoredTask, TaskChange } from '../tasks/task-store';

type Json = Record<string, unknown>;

const log = createLogger('A2ARelay');

/** How often a change tries again after another change won the compare-and-set. */
const CAS_ATTEMPTS = 3;

/** The record of a task's request on its agent's request topic, read back (libs/kafka PartitionReader). */
export interface RequestRecords {
  read(record: TaskRequestRecord): Promise<EventFrame>;
}

/** Writes a frame to an agent's request topic (the worker's producer). */
export interface RequestTopicWriter {
  publish(topic: string, frame: EventFrame): Promise<unknown>;
}

export interface DeliveryContext extends FollowContext {
  /**
   * Told each change the delivery records while the task has not settled (a delivery run as an activity: it signals
   * the task's workflow, which records the state and pushes the change, task-change-notices.ts). A delivery told so
   * follows the agent's task until it settles; one without it (the first attempt, run within the workflow's task)
   * follows it for a moment ({@link FOLLOW_INLINE_MS}) and answers, and the workflow delivers again to follow on.
   */
  onChange?: (task: StoredTask) => void;
  /**
   * The task and its agent as the caller has just read or written them (the process that took the task), so the
   * delivery reads neither again. A task changed since is no harm: its first change is a compare-and-set.
   */
  known?: { task: StoredTask; agent: StoredAgent; frame?: EventFrame };
}

/**
 * The task's row is not in Postgres (yet): the gateway starts a task's workflow while it writes the row, so a
 * delivery elsewhere may read before the row committed. Tried again (by Temporal) until the task's deadline; a row
 * never written (the gateway could not take the task, and ended the workflow if it could) fails the task then.
 */
export class TaskNotRecorded extends Error {}

/**
 * What the mesh does with an agent at a URL for one task, each step a unit the task's workflow runs as an activity
 * (activities/a2a-task.activities.ts): deliver the request (read from the agent's request topic) and follow the
 * agent's task until it settles; cancel it; fail it. Every change of the task is a compare-and-set from the version
 * read (task-store.ts), so whichever step commits first wins on every instance, and a step that lost re-reads.
 * Calls the agent did not answer throw {@link AgentUnreachable}-like errors for the caller to retry; what the agent
 * answered, even an error of the protocol, is recorded.
 */
export class TaskRelay {
  constructor(
    private readonly tasks: A2ATaskStore,
    private readonly agents: A2AAgentStore,
    private readonly clients: AgentClients,
    /** Where the requests are read from (the agents' request topics). */
    private readonly records: RequestRecords,
    /** Where a mesh-subscriber agent is told that a task it may hold was canceled or failed (its request topic). */
    private readonly notices: RequestTopicWriter,
    /** The agents' streams a first attempt leaves open for the delivery that follows it on this worker. */
    private readonly parked = new ParkedStreams(),
  ) {
    this.following = new AgentTaskFollower(tasks);
  }

  /** Follows the agent's task once it has the turn (agent-task-follower.ts). */
  private readonly following: AgentTaskFollower;

  /**
   * Sends the client's turn `turn` (its first message is turn 1; each message continuing the task, after the agent
   * asked for input, one more) to the agent, asking it to answer at once, and answers the state it recorded; or, once
   * that turn is recorded as sent (a delivery tried again does not send it again), follows the agent's task until it
   * settles: on the agent's stream when its card says it streams (`capabilities.streaming`), else with GetTask. Answers the state recorded last. A continuing turn names the agent's task and context.
   */
  async deliver(
    ids: TaskIds,
    request: TaskRequestRecord | undefined,
    ctx: DeliveryContext,
    turn = 1,
  ): Promise<A2AState> {
    // Both at once: the task as it is now, and where its agent is (unless the caller has them).
    const [task, agent] = ctx.known
      ? [ctx.known.task, ctx.known.agent]
      : await Promise.all([this.tasks.get(ids.tenant, ids.taskId), this.agents.get(ids.tenant, ids.agent)]);
    if (!task) throw new TaskNotRecorded(`task ${ids.taskId} is not recorded (yet)`);
    if (SETTLED.has(task.state)) return task.state;
    if (!agent) return (await this.fail(ids, `the agent ${ids.agent} was removed`)).state;
    const client = await this.clients.clientFor(agent);
    const opts = () => ({ signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(ctx.callTimeoutMs)]) });
    if (task.deliveredTurn < turn) {
      // The turn's request: as the gateway wrote it (it began this attempt), else read back from the agent's topic,
      // where the workflow's input or (a first turn) the task's row says it is.
      const record = request ?? task.requestRecord;
      if (!ctx.known?.frame && !record)
        throw new NotATaskFrame(`task ${task.id} names no request record for turn ${turn}`);
      const { request: sent } = taskFromFrame(ctx.known?.frame ?? (await this.records.read(record!)));
      // The first turn starts a task at the agent; a later one continues the agent's task, in its context.
      const continues =
        turn > 1 && task.agentTaskId ? { taskId: task.agentTaskId, contextId: task.contextId } : { taskId: '' };
      const outbound: SendMessageRequest = {
        ...sent,
        tenant: '',
        message: sent.message && { ...sent.message, ...continues },
        configuration: {
          acceptedOutputModes: [],
          historyLength: undefined,
          ...sent.configuration,
          returnImmediately: true,
          taskPushNotificationConfig: undefined,
        },
      };
      let change: TaskChange;
      let agentTask: Task | undefined;
      // An agent whose card says it streams is sent the turn on its stream and followed on it, so each status and
      // artifact it reports is recorded (none missed between two GetTask).
      const live = streamsOf(agent) ? new AgentStream(ctx.signal) : undefined;
      try {
        const answer = live
          ? await this.following.firstOfStream(
              live.open(client.sendMessageStream(outbound, { signal: live.signal })),
              ctx,
            )
          : await client.sendMessage(outbound, opts());
        if ('messageId' in answer) {
          const reply = Message.toJSON({ ...answer, taskId: task.id, contextId: task.contextId }) as Json;
          change = { state: 'completed', statusMessage: reply, history: [...task.history, reply] };
        } else {
          agentTask = answer;
          // A task the agent answered still running is asked about at once (one that finishes quickly has by
          // now), so that the send and its outcome are one change. Until that change is recorded, a delivery tried
          // again would send the turn again, as it would between any send and its record.
          if (!live && !SETTLED.has(stateOf(answer.status?.state) ?? 'failed')) {
            agentTask = await client
              .getTask({ tenant: '', id: answer.id, historyLength: undefined }, opts())
              .catch(() => answer);
          }
          change = changeOf(task, agentTask);
        }
      } catch (e) {
        live?.close();
        if (live && !ctx.signal.aborted && isNotAnEventStream(e)) {
          // The agent took the turn but answered it without a stream: sent again, it would take it again (at each
          // retry until the timeout). Recorded as an invalid answer instead; the card is what needs fixing.
          change = invalidAnswer(
            task,
            'its card says it streams (capabilities.streaming), but it answered the send with no event stream: fix the card',
          );
        } else if (!ctx.signal.aborted && isInvalidAnswer(e)) change = invalidAnswerOf(task, e);
        else if (!(e instanceof A2AError)) throw unreachable(e, ctx.signal);
        else
          change = {
            state: 'failed',
            statusMessage: agentMessage(task, `the agent refused the task: ${(e as Error).message}`),
          };
      }
      try {
        return await this.recordSend(task, { change, turn, agentTask, live }, client, ctx, opts);
      } finally {
        if (!this.parked.holds(task.id, turn, live)) live?.close();
      }
    }
    // The turn was sent: the agent's task is followed on; on the stream the first attempt left here, if it did.
    if (streamsOf(agent)) return this.following.followStream(task, client, ctx, opts, this.parked.take(task.id, turn));
    return this.following.follow(task, client, ctx, opts, { firstWaitMs: FOLLOW_FIRST_MS });
  }

  /**
   * Records what the agent answered the turn's send (the turn recorded as sent: a delivery tried again does not send
   * it again), then follows the agent's task for a moment: on its stream (`live`) when it streams, else with GetTask.
   */
  private async recordSend(
    task: StoredTask,
    { change, turn, agentTask, live }: { change: TaskChange; turn: number; agentTask?: Task; live?: AgentStream },
    client: Client,
    ctx: DeliveryContext,
    opts: () => { signal: AbortSignal },
  ): Promise<A2AState> {
    const result = await this.tasks.transition(task, { ...change, deliveredTurn: turn });
    if (!result.changed) {
      if (result.reason === 'missing') return 'failed';
      // Another change won (a cancel, or a deadline): it stands; the agent is told, best effort, if its task runs.
      if (
        agentTask &&
        TERMINAL.has(result.task.state) &&
        !TERMINAL.has(stateOf(agentTask.status?.state) ?? 'completed')
      ) {
        await client.cancelTask({ tenant: '', id: agentTask.id, metadata: undefined }, opts()).catch(() => undefined);
      }
      return result.task.state;
    }
    // The agent has the task (the turn is recorded as sent: nothing is sent twice). A first attempt follows it here
    // for a moment; one that has not settled by then goes back to the workflow, which records the state it is in and
    // delivers again to follow it on. A delivery that tells its workflow of each change follows it to the end.
    if (SETTLED.has(result.task.state)) return result.task.state;
    ctx.onChange?.(result.task);
    const untilMs = ctx.onChange ? Infinity : Date.now() + FOLLOW_INLINE_MS;
    if (live) {
      const on = await this.following.onStream(result.task, live, agentTask, ctx, untilMs);
      if (typeof on === 'string') return on;
      if (on.paused) {
        // The moment passed with the stream open: it is left for the delivery that follows on this worker.
        this.parked.park(task.id, turn, { live, snapshot: on.paused.snapshot });
        return on.unsettled.state;
      }
      // The stream ended or broke before the task settled: a delivery that follows to the end subscribes again; a
      // first attempt asks with GetTask for the rest of its moment.
      if (ctx.onChange) return this.following.followStream(on.unsettled, client, ctx, opts);
      return this.following.follow(on.unsettled, client, ctx, opts, { firstWaitMs: FOLLOW_INLINE_FIRST_MS, untilMs });
    }
    return this.following.follow(result.task, client, ctx, opts, { firstWaitMs: FOLLOW_INLINE_FIRST_MS, untilMs });
  }

  /**
   * Cancels the task: at the agent first when the agent has it (what the agent answers is recorded), then in
   * Postgres. `not-cancelable` when it settled first (or the agent says so), `unreachable` when the agent could not
   * be asked (nothing recorded: the task runs on at the agent).
   */
  async cancel(ids: TaskIds): Promise<CancelOutcome> {
    // The task and its agent at once; the agent is the same for every compare-and-set attempt below.
    const [read, agent] = await Promise.all([
      this.tasks.get(ids.tenant, ids.taskId),
      this.agents.get(ids.tenant, ids.agent),
    ]);
    let task = read;
    let noticed = false;
    for (let attempt = 0; task && attempt < CAS_ATTEMPTS; attempt++) {
      if (TERMINAL.has(task.state)) return { outcome: 'not-cancelable', state: task.state };
      let change: TaskChange = { state: 'canceled', statusMessage: null };
      if (agent?.style === 'subscriber') {
        if (!noticed) await this.notice(task, 'canceled');
        noticed = true;
      } else if (agent && task.agentTaskId) {
        const client = await this.clients.clientFor(agent);
        try {
          const answer = await client.cancelTask(
            { tenant: '', id: task.agentTaskId, metadata: undefined },
            this.clients.callOptions(),
          );
          change = changeOf(task, answer);
          if (change.state !== 'canceled') return { outcome: 'not-cancelable', state: await this.record(task, change) };
        } catch (e) {
          if (e instanceof TaskNotCancelableError)
            return { outcome: 'not-cancelable', state: await this.refresh(task, client) };
          // The agent does not know the task (it lost it): nothing runs there to stop; the mesh's task is canceled.
          if (e instanceof TaskNotFoundError) change = { state: 'canceled', statusMessage: null };
          else if (!(e instanceof A2AError))
            return {
              outcome: 'unreachable',
              state: task.state,
              reason: `the agent could not be reached to cancel its task: ${(e as Error).message}`,
            };
          else throw e;
        }
      }
      const result = await this.tasks.transition(task, change);
      if (result.changed) return { outcome: 'canceled', state: result.task.state };
      if (result.reason === 'missing') break;
      task = result.task;
    }
    if (!task) return { outcome: 'missing' };
    return { outcome: 'not-cancelable', state: task.state };
  }

  /** Fails the task with a status message saying why (a deadline, a delivery that cannot succeed); a task that settled first stays. */
  async fail(ids: TaskIds, reason: string): Promise<{ state: A2AState }> {
    let task = await this.tasks.get(ids.tenant, ids.taskId);
    let noticed = false;
    for (let attempt = 0; task && attempt < CAS_ATTEMPTS; attempt++) {
      if (TERMINAL.has(task.state)) return { state: task.state };
      if (!noticed && (await this.agents.get(ids.tenant, ids.agent))?.style === 'subscriber')
        await this.notice(task, 'failed');
      noticed = true;
      const result = await this.tasks.transition(task, { state: 'failed', statusMessage: agentMessage(task, reason) });
      if (result.changed) {
        log.warn({ agent: ids.agent, task: ids.taskId, reason }, 'task failed');
        const agentTaskId = task.agentTaskId;
        const agent = agentTaskId ? await this.agents.get(ids.tenant, ids.agent) : undefined;
        if (agent && agentTaskId) {
          const client = await this.clients.clientFor(agent);
          await client
            .cancelTask({ tenant: '', id: agentTaskId, metadata: undefined }, this.clients.callOptions())
            .catch(() => undefined);
        }
        return { state: 'failed' };
      }
      if (result.reason === 'missing') break;
      task = result.task;
    }
    return { state: task?.state ?? 'failed' };
  }

  /**
   * Tells a mesh-subscriber agent to stop working on the task: a cancel frame on its request topic
   * (a2a-frame.adaptor.ts), written before the task is canceled or failed in Postgres, so that a crash in between
   * leaves a step that is tried again (by Temporal, or by the client) rather than an agent never told. A notice for a
   * task that then settles otherwise (it completed first) is harmless: the agent's updates to it are refused anyway.
   */
  private async notice(task: StoredTask, reason: 'canceled' | 'failed'): Promise<void> {
    const frame = cancelToFrame({ taskId: task.id, contextId: task.contextId, agent: task.agent }, reason, new Date());
    await this.notices.publish(requestTopicOf(task.tenant, task.agent), frame);
  }

  private async record(task: StoredTask, change: TaskChange): Promise<A2AState> {
    const result = await this.tasks.transition(task, change);
    return result.changed || result.reason !== 'missing' ? result.task.state : task.state;
  }

  /** The task as the agent has it now, recorded; as recorded when the agent cannot be asked. */
  private async refresh(task: StoredTask, client: Client): Promise<A2AState> {
    try {
      const answer = await client.getTask(
        { tenant: '', id: task.agentTaskId!, historyLength: undefined },
        this.clients.callOptions(),
      );
      return await this.record(task, changeOf(task, answer));
    } catch {
      return task.state;
    }
  }
}

/** Whether the agent's card says it streams (`capabilities.streaming`): the mesh then follows its tasks on its streams. */
function streamsOf(agent: StoredAgent): boolean {
  return (agent.card.capabilities as { streaming?: boolean } | undefined)?.streaming === true;
}

export type { StoredAgent };

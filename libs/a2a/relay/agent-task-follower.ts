import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Artifact, Message, StreamResponse, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { A2AError, InvalidAgentResponseError, TaskNotFoundError } from '@a2a-js/sdk/errors';
import { INVALID_ANSWER_METADATA, isAnswerTooLarge, isInvalidAnswer, tooLargeReason } from './invalid-answers';
import { AgentStream, applyEvent, StreamRead } from './agent-stream';
import type { ParkedStream } from './parked-streams';
import { A2AState, SETTLED, stateOf } from '../tasks/task-states';
import { sameJson } from '../tasks/task-events';
import type { A2ATaskStore, StoredTask, TaskChange } from '../tasks/task-store';

type Json = Record<string, unknown>;

/** Following an agent's task: the first GetTask after this long, then twice as long each time, at most the max. */
export const FOLLOW_FIRST_MS = 25;
/** Following right after the send (the first moment, FOLLOW_INLINE_MS): the first GetTask after this long, doubling. */
export const FOLLOW_INLINE_FIRST_MS = 5;
const FOLLOW_MAX_MS = 1000;
/**
 * Right after the send, a first attempt follows the agent's task itself for this long (its first GetTask at once,
 * before the send is recorded), so a task the agent finishes quickly settles within one delivery; one still running
 * then is returned to the workflow, which records its state (the operators' search attribute) and delivers again, as
 * an activity, to follow it to the end.
 */
export const FOLLOW_INLINE_MS = 1000;

/** A call to the agent that got no answer (network, deadline): retried by the caller (Temporal), never recorded. */
export class AgentUnreachable extends Error {}

/** What following an agent's task needs of its delivery (task-relay.ts `DeliveryContext`). */
export interface FollowContext {
  /** Aborted when the delivery is canceled (a cancel of the task, its deadline, the worker shutting down). */
  signal: AbortSignal;
  callTimeoutMs: number;
  /** Told each change recorded while the task has not settled (see task-relay.ts, `DeliveryContext`). */
  onChange?: (task: StoredTask) => void;
}

/** The options of one call to the agent: the delivery's cancel and the call's own timeout. */
export type CallOptions = () => { signal: AbortSignal };

/**
 * Follows an agent's task once the mesh has sent it the turn (task-relay.ts): on the agent's stream, or with
 * GetTask, recording each change the agent reports with a compare-and-set from the version read, until the task
 * settles (or a deadline given passes). A change another writer won (a cancel, a deadline) stands: the follower
 * goes on from the task as that writer left it.
 */
export class AgentTaskFollower {
  constructor(private readonly tasks: Pick<A2ATaskStore, 'transition'>) {}

  /**
   * The first event of the agent's stream of a send, as `sendMessage` would answer it: a task (or an event of one,
   * made a task), or a message. No event within the call timeout is a call unanswered; a stream ended without one
   * is not an A2A answer.
   */
  async firstOfStream(live: AgentStream, ctx: FollowContext): Promise<Task | Message> {
    const first = await live.next(ctx.callTimeoutMs);
    if ('timedOut' in first) throw new AgentUnreachable(`the agent sent no event within ${ctx.callTimeoutMs} ms`);
    const event = 'event' in first ? first.event : undefined;
    if (event?.payload?.$case === 'message') return event.payload.value;
    const task = event && applyEvent(undefined, event);
    if (!task) throw new InvalidAgentResponseError('the agent ended its stream without a task or message');
    return task;
  }

  /**
   * Follows the agent's task on the agent's stream until it settles: on `parked`, the stream an earlier delivery left
   * open (parked-streams.ts), where it stopped, else on a `SubscribeToTask`. A stream that breaks after its first
   * event is subscribed again; one the agent refuses (a task that ended, or that it does not know), or that ends
   * with the task unsettled, leaves the rest to GetTask, whose answer says which.
   */
  async followStream(
    from: StoredTask,
    client: Client,
    ctx: FollowContext,
    opts: CallOptions,
    parked?: ParkedStream,
  ): Promise<A2AState> {
    let task = from;
    for (let wait = 0; ; wait = Math.min(Math.max(wait * 2, FOLLOW_FIRST_MS), FOLLOW_MAX_MS)) {
      if (wait > 0) await sleep(wait, undefined, { signal: ctx.signal });
      const taken = parked;
      parked = undefined;
      const live = taken ? taken.live.adopt(ctx.signal) : new AgentStream(ctx.signal);
      try {
        let first: StreamResponse | undefined;
        if (!taken) {
          live.open(client.resubscribeTask({ tenant: '', id: task.agentTaskId! }, { signal: live.signal }));
          const read = await live.next(ctx.callTimeoutMs).catch((e: unknown) => {
            if (ctx.signal.aborted) throw e;
            return { done: true } as const;
          });
          if (!('event' in read))
            return await this.follow(task, client, ctx, opts, { firstWaitMs: FOLLOW_INLINE_FIRST_MS });
          first = read.event;
        }
        const on = await this.onStream(task, live, taken?.snapshot, ctx, Infinity, first);
        if (typeof on === 'string') return on;
        if (!on.broken) return await this.follow(on.unsettled, client, ctx, opts, { firstWaitMs: FOLLOW_FIRST_MS });
        task = on.unsettled;
      } finally {
        live.close();
      }
    }
  }

  /**
   * Reads the agent's stream (after `pending`, an event read already), recording each change of the agent's task it
   * reports, until the task settles: answers the state recorded last. A stream that ends (or breaks: `broken`) first
   * answers the task as recorded last, unsettled; so does one still open when `untilMs` passes (`paused`: the agent's
   * task as the stream told it so far, the stream's next read pending, for a delivery after this one to read on).
   */
  async onStream(
    from: StoredTask,
    live: AgentStream,
    snapshot: Task | undefined,
    ctx: FollowContext,
    untilMs: number,
    pending?: StreamResponse,
  ): Promise<A2AState | { unsettled: StoredTask; broken: boolean; paused?: { snapshot: Task | undefined } }> {
    let task = from;
    let agentTask = snapshot;
    let next = pending;
    while (!SETTLED.has(task.state)) {
      if (!next) {
        let read: StreamRead;
        try {
          read = await live.next(untilMs - Date.now(), { keepOnTimeout: true });
        } catch (e) {
          if (ctx.signal.aborted) throw e;
          // An event larger than the mesh reads would come again on a stream opened again: the task fails now.
          if (isAnswerTooLarge(e)) {
            const result = await this.tasks.transition(task, invalidAnswerOf(task, e));
            return result.changed || result.reason !== 'missing' ? result.task.state : 'failed';
          }
          return { unsettled: task, broken: true };
        }
        if ('timedOut' in read) return { unsettled: task, broken: false, paused: { snapshot: agentTask } };
        if ('done' in read) return { unsettled: task, broken: false };
        next = read.event;
      }
      agentTask = applyEvent(agentTask, next);
      next = undefined;
      if (!agentTask) continue;
      const change = changeOf(task, agentTask);
      if (!differs(task, change)) continue;
      const result = await this.tasks.transition(task, change);
      if (result.changed) {
        task = result.task;
        if (!SETTLED.has(task.state)) ctx.onChange?.(task);
      } else if (result.reason === 'missing') return 'failed';
      else task = result.task;
    }
    return task.state;
  }

  /**
   * See {@link AgentLostTask}: records the first turn as not sent, the lost task's id and artifacts gone, and throws
   * it (also when another change won: the delivery tried again looks at the task as it is then).
   */
  private async sendAgain(task: StoredTask): Promise<never> {
    const result = await this.tasks.transition(task, {
      state: task.state,
      deliveredTurn: 0,
      agentTaskId: null,
      artifacts: [],
      agentResends: task.agentResends + 1,
    });
    const why = result.changed
      ? 'its first turn is recorded as not sent, for the delivery tried next'
      : 'the task changed meanwhile';
    throw new AgentLostTask(`the agent does not know its task ${task.agentTaskId} (it restarted without it?): ${why}`);
  }

  /**
   * Follows the agent's task with GetTask, waiting `firstWaitMs` before the first and twice as long each time (at
   * most {@link FOLLOW_MAX_MS}), recording each change, until it settles (or `untilMs` passes). Answers the state
   * recorded last.
   */
  async follow(
    from: StoredTask,
    client: Client,
    ctx: FollowContext,
    opts: CallOptions,
    { firstWaitMs, untilMs = Infinity }: { firstWaitMs: number; untilMs?: number },
  ): Promise<A2AState> {
    let task = from;
    let wait = firstWaitMs;
    while (!SETTLED.has(task.state)) {
      if (Date.now() + wait > untilMs) return task.state;
      await sleep(wait, undefined, { signal: ctx.signal });
      wait = Math.min(wait * 2, FOLLOW_MAX_MS);
      let answer: Task;
      try {
        answer = await client.getTask({ tenant: '', id: task.agentTaskId!, historyLength: undefined }, opts());
      } catch (e) {
        const invalid = !ctx.signal.aborted && isInvalidAnswer(e);
        if (!(e instanceof A2AError) && !invalid) throw unreachable(e, ctx.signal);
        if (e instanceof TaskNotFoundError && task.deliveredTurn === 1 && task.agentResends === 0)
          await this.sendAgain(task);
        const change = invalid
          ? invalidAnswerOf(task, e)
          : {
              state: 'failed' as const,
              statusMessage: agentMessage(task, `the agent lost the task: ${(e as Error).message}`),
            };
        const result = await this.tasks.transition(task, change);
        return result.changed || result.reason !== 'missing' ? result.task.state : 'failed';
      }
      const change = changeOf(task, answer);
      if (!differs(task, change)) continue;
      const result = await this.tasks.transition(task, change);
      if (result.changed) {
        task = result.task;
        wait = firstWaitMs;
        if (!SETTLED.has(task.state)) ctx.onChange?.(task);
      } else if (result.reason === 'missing') return 'failed';
      else task = result.task;
    }
    return task.state;
  }
}

/**
 * The agent does not know the task it took the first turn of (it restarted and kept its tasks in memory, say): the
 * turn is recorded as not sent (`deliveredTurn` 0, the agent's task id and artifacts cleared, a compare-and-set) and
 * the delivery fails as an agent unreached, so that the delivery tried again sends the turn again, as a new task at
 * the agent (within the task's timeout and its retry policy; at least once: the agent may have done the lost task).
 * Once only (`agentResends`): an agent that loses the task again (replicas that do not share their tasks, an agent
 * that keeps none) fails it ("the agent lost the task"), as does one that lost a later turn, which continued the
 * agent's task, gone with it.
 */
export class AgentLostTask extends AgentUnreachable {}

/** Whether a change says something the task does not (state, status message, artifacts): only those are recorded. */
export function differs(task: StoredTask, change: TaskChange): boolean {
  return (
    change.state !== task.state ||
    !sameJson(change.statusMessage, task.statusMessage) ||
    !sameJson(change.artifacts ?? task.artifacts, task.artifacts)
  );
}

/** A failure of a call to the agent: the delivery's own cancel as it is, else an agent unreached (tried again). */
export function unreachable(e: unknown, signal: AbortSignal): Error {
  if (signal.aborted) return e as Error;
  return new AgentUnreachable(`the agent could not be reached: ${(e as Error).message}`);
}

/** What an agent's task says, as a change of the mesh's task (ids rewritten to the mesh's). */
export function changeOf(task: StoredTask, answer: Task): TaskChange {
  const state = stateOf(answer.status?.state);
  if (!state) {
    return {
      state: 'failed',
      statusMessage: agentMessage(task, `the agent answered an invalid task state (${String(answer.status?.state)})`),
      agentTaskId: answer.id || undefined,
    };
  }
  const rewrite = (m: Message): Json =>
    Message.toJSON({ ...m, taskId: task.id, contextId: answer.contextId || task.contextId }) as Json;
  return {
    state,
    statusMessage: answer.status?.message ? rewrite(answer.status.message) : null,
    history: answer.history.length > 0 ? answer.history.map(rewrite) : task.history,
    artifacts: answer.artifacts.map((a) => Artifact.toJSON(a) as Json),
    agentTaskId: answer.id,
    contextId: answer.contextId || undefined,
  };
}

/** A status message from the mesh, in the agent's role, about the task. */
export function agentMessage(task: StoredTask, text: string, metadata?: Json): Json {
  return {
    messageId: randomUUID(),
    contextId: task.contextId,
    taskId: task.id,
    role: 'ROLE_AGENT',
    parts: [{ text }],
    ...(metadata ? { metadata } : {}),
  };
}

/**
 * The task failed on the agent's answer `e` (isInvalidAnswer): one larger than the mesh reads says so, any other
 * that it is not a valid A2A answer. Both carry the invalid-answer metadata (a blocking send of it is -32006).
 */
export function invalidAnswerOf(task: StoredTask, e: unknown): TaskChange {
  if (isAnswerTooLarge(e))
    return { state: 'failed', statusMessage: agentMessage(task, tooLargeReason(e), INVALID_ANSWER_METADATA) };
  return invalidAnswer(task, (e as Error).message);
}

/** The task failed because the agent answered what is not an A2A answer (`why`), its status message says so (invalid-answers.ts). */
export function invalidAnswer(task: StoredTask, why: string): TaskChange {
  return {
    state: 'failed',
    statusMessage: agentMessage(task, `the agent's answer is not a valid A2A answer: ${why}`, INVALID_ANSWER_METADATA),
  };
}

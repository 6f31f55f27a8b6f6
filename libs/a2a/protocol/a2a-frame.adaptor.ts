import { SendMessageRequest } from '@a2a-js/sdk';
import type { EventFrame, FrameAdaptor } from '@libs/frame';
import type { TaskEvent, TaskEventKind } from '../tasks/task-events';

/** The frame type of a task sent to an agent (a `SendMessage` the mesh took for it). */
export const A2A_TASK_FRAME_TYPE = 'a2a.task.send';
/** The content type of its data: the A2A v1.0 JSON of the `SendMessageRequest`. */
export const A2A_TASK_CONTENT_TYPE = 'application/a2a+json';

/** What a task frame carries besides the request: the mesh's ids, in extension attributes. */
export interface TaskFrameIds {
  taskId: string;
  contextId: string;
  agent: string;
}

export class NotATaskFrame extends Error {}

/**
 * The A2A adaptor of the internal frame (libs/frame/event-frame.ts): a task sent to an agent becomes one frame
 * on the agent's request topic, directly (no CloudEvents object on the way). The frame's id is the mesh's task id
 * (what a subscriber dedupes on), its partition key too (one task, one partition); its data is the
 * `SendMessageRequest` as A2A v1.0 JSON, its message carrying the mesh's task and context ids; the ids travel
 * again as extensions (`a2ataskid`, `a2acontextid`, `a2aagent`, and `a2aturn`: 1 for the task's first message, more
 * for each message continuing it) so a subscriber routes without parsing the data.
 */
export function taskToFrame(ids: TaskFrameIds, request: SendMessageRequest, time: Date, turn = 1): EventFrame {
  const message = request.message && { ...request.message, taskId: ids.taskId, contextId: ids.contextId };
  const data = SendMessageRequest.toJSON({ ...request, tenant: '', message }) as Record<string, unknown>;
  return {
    // A message continuing the task is a frame of its own (a subscriber dedupes on the id): `<taskId>.<turn>`.
    id: turn > 1 ? `${ids.taskId}.${turn}` : ids.taskId,
    source: `/a2a/agents/${ids.agent}`,
    type: A2A_TASK_FRAME_TYPE,
    time: time.toISOString(),
    datacontenttype: A2A_TASK_CONTENT_TYPE,
    extensions: {
      a2ataskid: ids.taskId,
      a2acontextid: ids.contextId,
      a2aagent: ids.agent,
      a2aturn: String(turn),
      partitionkey: ids.taskId,
    },
    data: Buffer.from(JSON.stringify(data)),
  };
}

/** What A2A's inbound side hands its adaptor: a message the mesh took for a task, with the mesh's ids. */
export interface TaskMessage {
  ids: TaskFrameIds;
  request: SendMessageRequest;
  /** When the mesh took it (the frame's `time`). */
  time: Date;
  /** 1 for the task's first message, more for each message continuing it. */
  turn?: number;
}

/**
 * A2A on the frame SPI (libs/frame/frame-adaptor.ts): a task message converts directly to one frame
 * ({@link taskToFrame}), and a frame encodes as the A2A v1.0 JSON its data holds. Not in the gateway's registry of
 * request adaptors: A2A messages come to the agents' JSON-RPC endpoints (mesh-task-handler.ts), which hand this
 * adaptor the message with the ids the mesh gave the task.
 */
export const a2aTaskAdaptor = {
  name: 'a2a-task',
  decode: (message: TaskMessage) => [taskToFrame(message.ids, message.request, message.time, message.turn)],
  encode: (frame: EventFrame) => ({ headers: { 'content-type': A2A_TASK_CONTENT_TYPE }, body: frame.data }),
} satisfies FrameAdaptor<TaskMessage>;

/** The inverse of {@link taskToFrame}; a frame that is not a task frame is refused. */
export function taskFromFrame(frame: EventFrame): TaskFrameIds & { request: SendMessageRequest } {
  const { a2ataskid, a2acontextid, a2aagent } = frame.extensions;
  if (
    frame.type !== A2A_TASK_FRAME_TYPE ||
    typeof a2ataskid !== 'string' ||
    typeof a2acontextid !== 'string' ||
    typeof a2aagent !== 'string' ||
    !frame.data
  ) {
    throw new NotATaskFrame(`frame ${frame.id} is not an A2A task frame (type ${frame.type})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(frame.data.toString('utf8'));
  } catch (e) {
    throw new NotATaskFrame(`frame ${frame.id}: its data is not JSON (${(e as Error).message})`);
  }
  return { taskId: a2ataskid, contextId: a2acontextid, agent: a2aagent, request: SendMessageRequest.fromJSON(json) };
}

/** The frame type of a cancel sent to a mesh-subscriber agent: stop working on the task. */
export const A2A_CANCEL_FRAME_TYPE = 'a2a.task.cancel';

/**
 * A cancel of a task for a mesh-subscriber agent, on the agent's request topic after the task's request (same
 * partition key: one task, one partition, so a subscription in `partition` or `key` order delivers it after the
 * request). Its id is `<taskId>.cancel` (a subscriber dedupes on it); its data the A2A v1.0 JSON of a
 * `CancelTaskRequest` naming the mesh's task; the ids as extensions, as on the task's request. `reason` says why:
 * `canceled` (a client canceled it) or `failed` (the mesh failed it: its deadline, a delivery that cannot succeed).
 */
export function cancelToFrame(ids: TaskFrameIds, reason: 'canceled' | 'failed', time: Date): EventFrame {
  return {
    id: `${ids.taskId}.cancel`,
    source: `/a2a/agents/${ids.agent}`,
    type: A2A_CANCEL_FRAME_TYPE,
    time: time.toISOString(),
    datacontenttype: A2A_TASK_CONTENT_TYPE,
    extensions: {
      a2ataskid: ids.taskId,
      a2acontextid: ids.contextId,
      a2aagent: ids.agent,
      a2areason: reason,
      partitionkey: ids.taskId,
    },
    data: Buffer.from(JSON.stringify({ id: ids.taskId })),
  };
}

/** The frame types of a task's events on its agent's events topic, by the event's kind (task-events.ts). */
export const A2A_EVENT_FRAME_TYPES: Readonly<Record<TaskEventKind, string>> = {
  task: 'a2a.task.snapshot',
  'status-update': 'a2a.task.status',
  'artifact-update': 'a2a.task.artifact',
};

/**
 * One event of a task's log as a frame of its agent's events topic (task-event-publisher.ts): id `<taskId>.<seq>`
 * (an observer dedupes on it), partition key the task id (a task's events in one partition, in seq order), data the
 * event as A2A v1.0 JSON (a `Task`, a `TaskStatusUpdateEvent` or a `TaskArtifactUpdateEvent`, as the task's SSE
 * streams send it), and as extensions the task's ids, the event's `a2aseq`, and on a snapshot or a status update
 * `a2astate`, the state it tells (the A2A v1.0 name: `TASK_STATE_COMPLETED`), for subscription filters.
 */
export function taskEventToFrame(event: TaskEvent, agent: string, time: Date): EventFrame {
  const state = (event.payload.status as { state?: unknown } | undefined)?.state;
  return {
    id: `${event.taskId}.${event.seq}`,
    source: `/a2a/agents/${agent}`,
    type: A2A_EVENT_FRAME_TYPES[event.kind],
    time: time.toISOString(),
    datacontenttype: A2A_TASK_CONTENT_TYPE,
    extensions: {
      a2ataskid: event.taskId,
      a2acontextid: String(event.payload.contextId ?? ''),
      a2aagent: agent,
      a2aseq: String(event.seq),
      ...(typeof state === 'string' ? { a2astate: state } : {}),
      partitionkey: event.taskId,
    },
    data: Buffer.from(JSON.stringify(event.payload)),
  };
}

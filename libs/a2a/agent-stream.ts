import type { StreamResponse, Task } from '@a2a-js/sdk';

/** What reading an agent's stream gave: an event, its end, or nothing within the wait. */
export type StreamRead = { event: StreamResponse } | { done: true } | { timedOut: true };

/**
 * One stream of an agent's events (`SendStreamingMessage`, `SubscribeToTask`), read by the mesh as its A2A client:
 * each read bounded by a wait, and the connection closed by {@link close} (or by `outer`, the delivery's cancel)
 * whatever the reader is doing. Every read that ends early closes the stream: a generator's pending read is never
 * left behind.
 */
export class AgentStream {
  private readonly stop = new AbortController();
  /** The signal of the stream's call: the delivery's cancel, or this stream closed. */
  readonly signal: AbortSignal;
  private events?: AsyncGenerator<StreamResponse, void, undefined>;

  constructor(outer: AbortSignal) {
    this.signal = AbortSignal.any([outer, this.stop.signal]);
  }

  /** The stream's events (the SDK client's generator, called with {@link signal}). */
  open(events: AsyncGenerator<StreamResponse, void, undefined>): this {
    this.events = events;
    return this;
  }

  /** The next event, the stream's end, or `timedOut` after `withinMs` (the stream is then closed). Throws what the stream throws. */
  async next(withinMs = Infinity): Promise<StreamRead> {
    const read = this.events!.next().then(asRead);
    if (withinMs === Infinity) return read;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<{ timedOut: true }>((resolve) => (timer = setTimeout(() => resolve({ timedOut: true }), Math.max(0, withinMs))));
    try {
      const first = await Promise.race([read, timedOut]);
      if ('timedOut' in first) {
        read.catch(() => undefined); // ends with the close below
        this.close();
      }
      return first;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes the connection (idempotent). */
  close(): void {
    this.stop.abort();
  }
}

const asRead = (r: IteratorResult<StreamResponse, void>): StreamRead => (r.done ? { done: true } : { event: r.value });

/**
 * The SDK client's refusal of an answer to a streaming call that came back, but not as an event stream (JSON with a
 * result, say: a JSON-RPC error is thrown as the protocol's error instead). The agent answered: it took the call,
 * whatever its card says of streaming. The SDK says so only in the message (both of its transports).
 */
export function isNotAnEventStream(e: unknown): boolean {
  return e instanceof Error && /Invalid response Content-Type for SSE stream/.test(e.message);
}

/**
 * The agent's task after one event of its stream: a task replaces it, a status update sets its status, an artifact
 * update adds the artifact, replaces the one with its id, or (`append`) adds its parts to that one. A message is not
 * a change of a task (the stream of a send answered by a message is that message alone). Never mutates `task`.
 */
export function applyEvent(task: Task | undefined, event: StreamResponse): Task | undefined {
  const p = event.payload;
  if (!p || p.$case === 'message') return task;
  if (p.$case === 'task') return p.value;
  const base: Task = task ?? { id: p.value.taskId, contextId: p.value.contextId, status: undefined, artifacts: [], history: [], metadata: undefined };
  if (p.$case === 'statusUpdate') return { ...base, status: p.value.status };
  const artifact = p.value.artifact;
  if (!artifact) return base;
  const at = base.artifacts.findIndex((a) => a.artifactId === artifact.artifactId);
  const artifacts = [...base.artifacts];
  if (at < 0) artifacts.push(artifact);
  else artifacts[at] = p.value.append ? { ...artifacts[at], parts: [...artifacts[at].parts, ...artifact.parts] } : artifact;
  return { ...base, artifacts };
}

import type { StreamResponse, Task } from '@a2a-js/sdk';

/** What reading an agent's stream gave: an event, its end, or nothing within the wait. */
export type StreamRead = { event: StreamResponse } | { done: true } | { timedOut: true };

/**
 * One stream of an agent's events (`SendStreamingMessage`, `SubscribeToTask`), read by the mesh as its A2A client:
 * each read bounded by a wait, and the connection closed by {@link close} (or by `outer`, the cancel of the delivery
 * reading it) whatever the reader is doing. Every read that ends early closes the stream: a generator's pending read
 * is never left behind. A stream can change hands ({@link adopt}): the delivery that takes it over reads on, and its
 * cancel closes it from then on.
 */
export class AgentStream {
  private readonly stop = new AbortController();
  /** The signal of the stream's call: aborted once the stream is closed (by its reader's cancel, or {@link close}). */
  readonly signal: AbortSignal = this.stop.signal;
  private events?: AsyncGenerator<StreamResponse, void, undefined>;
  private outer: AbortSignal;
  private readonly closeOnAbort = () => this.close();

  constructor(outer: AbortSignal) {
    this.outer = outer;
    this.follow(outer);
  }

  /** From now on the stream is closed by `outer` (the cancel of the delivery that takes it over), no longer by the one before. */
  adopt(outer: AbortSignal): this {
    this.outer.removeEventListener('abort', this.closeOnAbort);
    this.outer = outer;
    this.follow(outer);
    return this;
  }

  get closed(): boolean {
    return this.stop.signal.aborted;
  }

  private follow(outer: AbortSignal): void {
    if (outer.aborted) this.close();
    else outer.addEventListener('abort', this.closeOnAbort, { once: true });
  }

  /** The stream's events (the SDK client's generator, called with {@link signal}). */
  open(events: AsyncGenerator<StreamResponse, void, undefined>): this {
    this.events = events;
    return this;
  }

  /**
   * The next event, the stream's end, or `timedOut` after `withinMs`: the stream is then closed, or (`keepOnTimeout`)
   * left open with its read pending, which the next call (of this reader or of the one it hands the stream to)
   * answers. Throws what the stream throws.
   */
  async next(withinMs = Infinity, { keepOnTimeout = false }: { keepOnTimeout?: boolean } = {}): Promise<StreamRead> {
    const read = this.pending ?? this.events!.next().then(asRead);
    this.pending = read;
    // A read left pending whose stream then breaks is not an unhandled rejection: its next reader gets the error.
    read.catch(() => undefined);
    const answered = () => {
      if (this.pending === read) this.pending = undefined;
    };
    if (withinMs === Infinity) return read.finally(answered);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<{ timedOut: true }>(
      (resolve) => (timer = setTimeout(() => resolve({ timedOut: true }), Math.max(0, withinMs))),
    );
    try {
      const first = await Promise.race([read, timedOut]);
      if (!('timedOut' in first)) answered();
      else if (!keepOnTimeout) this.close(); // the pending read ends with the close
      return first;
    } catch (e) {
      answered();
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  /** A read begun and not answered yet (it timed out, the stream kept open). */
  private pending?: Promise<StreamRead>;

  /** Closes the connection (idempotent). */
  close(): void {
    this.outer.removeEventListener('abort', this.closeOnAbort);
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
  const base: Task = task ?? {
    id: p.value.taskId,
    contextId: p.value.contextId,
    status: undefined,
    artifacts: [],
    history: [],
    metadata: undefined,
  };
  if (p.$case === 'statusUpdate') return { ...base, status: p.value.status };
  const artifact = p.value.artifact;
  if (!artifact) return base;
  const at = base.artifacts.findIndex((a) => a.artifactId === artifact.artifactId);
  const artifacts = [...base.artifacts];
  if (at < 0) artifacts.push(artifact);
  else
    artifacts[at] = p.value.append
      ? { ...artifacts[at], parts: [...artifacts[at].parts, ...artifact.parts] }
      : artifact;
  return { ...base, artifacts };
}

import { once } from 'node:events';
import type { FastifyReply } from 'fastify';
import type { ServerCallContext } from '@a2a-js/sdk/server';
import { STREAM_STATE, streamSeqOf, TaskStreams } from '@libs/a2a';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';

const log = createLogger('A2AStream');

/** One open stream's hold on the process's stream cap (TaskStreams.acquire). */
export type StreamLease = NonNullable<ReturnType<TaskStreams['acquire']>>;

/**
 * Takes a stream slot and puts what the request handler reads into the call's context: the stream's abort signal
 * and the client's `Last-Event-ID`. Past EVENTMESH_AGENTS_MAX_STREAMS: 503 `OVERLOADED` with Retry-After.
 */
export function openStream(
  streams: TaskStreams,
  context: ServerCallContext,
  lastEventId: string | undefined,
): StreamLease {
  const lease = streamSlot(streams);
  context.state.set(STREAM_STATE.signal, lease.signal);
  if (lastEventId !== undefined) context.state.set(STREAM_STATE.lastEventId, lastEventId);
  return lease;
}

/** A slot of the process's stream cap; past EVENTMESH_AGENTS_MAX_STREAMS, 503 `OVERLOADED` with Retry-After. */
export function streamSlot(streams: TaskStreams): StreamLease {
  const lease = streams.acquire();
  if (lease) return lease;
  throw new EventMeshError(
    ErrorCode.Overloaded,
    `this gateway process holds ${streams.size} A2A streams, its most (EVENTMESH_AGENTS_MAX_STREAMS); subscribe again later`,
    { limit: 'a2aStreams', maxStreams: streams.maxStreams, retryAfterSeconds: 1 },
    true,
  );
}

export interface SseEvents {
  /** The transport handler's stream, its first event already read (the call's errors before it are answered as the binding's). */
  first: IteratorResult<unknown, void>;
  rest: AsyncGenerator<unknown, void, undefined>;
  context: ServerCallContext;
  /** The `data:` of an event. */
  dataOf(event: unknown): unknown;
  /** The `data:` of the `event: error` that ends a stream failing midway. */
  errorOf(e: unknown): unknown;
}

const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** A stream of one `event: error`, `data:` the error answer, then its end: a stream refused before its first event. */
export function writeSseError(reply: FastifyReply, error: unknown): void {
  reply.hijack();
  reply.raw.writeHead(200, SSE_HEADERS);
  reply.raw.end(`event: error\ndata: ${JSON.stringify(error)}\n\n`);
}

/**
 * Writes a task stream as Server-Sent Events: each event `id: <seq>` (its seq in the task's log, what
 * `Last-Event-ID` names on a resume) and `data: <JSON>`; a comment (`: keep-alive`) when nothing was written for
 * `heartbeatMs`; an `event: error` when the stream fails midway. Ends when the stream ends, and ends the stream when
 * the client goes away (its abort signal: no poller is left behind). Releases the lease either way.
 */
export async function writeSse(
  reply: FastifyReply,
  events: SseEvents,
  lease: StreamLease,
  heartbeatMs: number,
): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, SSE_HEADERS);
  raw.once('close', () => lease.abort());
  let lastWrite = Date.now();
  const write = async (chunk: string): Promise<void> => {
    if (raw.destroyed || raw.writableEnded) return;
    lastWrite = Date.now();
    if (!raw.write(chunk)) await once(raw, 'drain', { signal: lease.signal }).catch(() => undefined);
  };
  const heartbeat = setInterval(
    () => {
      if (Date.now() - lastWrite >= heartbeatMs) void write(': keep-alive\n\n');
    },
    Math.max(50, Math.floor(heartbeatMs / 4)),
  );
  const send = (event: unknown) =>
    write(`id: ${streamSeqOf(events.context) ?? ''}\ndata: ${JSON.stringify(events.dataOf(event))}\n\n`);
  try {
    if (!events.first.done) await send(events.first.value);
    if (!events.first.done) for await (const event of events.rest) await send(event);
  } catch (e) {
    if (!lease.signal.aborted) {
      log.warn({ error: (e as Error).message }, 'an A2A stream failed midway');
      await write(`event: error\ndata: ${JSON.stringify(events.errorOf(e))}\n\n`);
    }
  } finally {
    clearInterval(heartbeat);
    lease.release();
    if (!raw.writableEnded) raw.end();
  }
}

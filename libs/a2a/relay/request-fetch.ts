import { pipeline, Readable, Transform } from 'node:stream';
import { request, type Dispatcher } from 'undici';

/**
 * An agent's answer larger than the mesh reads (EVENTMESH_AGENTS_MAX_ANSWER_BYTES): the read was aborted. An
 * answer, not an agent not reached: asked again, the agent would answer the same, so the task fails at once
 * (invalid-answers.ts).
 */
export class AgentAnswerTooLarge extends Error {
  constructor(
    readonly limitBytes: number,
    what: 'answer' | 'stream event',
  ) {
    super(
      `the agent's ${what} is larger than the mesh reads (EVENTMESH_AGENTS_MAX_ANSWER_BYTES = ${limitBytes} bytes); the read was aborted`,
    );
    this.name = 'AgentAnswerTooLarge';
  }
}

/** Statuses whose answer has no body (a Response refuses one). */
const NO_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * A `fetch` for the SDK's A2A clients, on undici's `request` API through `dispatcher` (the sink guard's pinned
 * connector). The SDK takes any fetch; undici's own `fetch` builds WHATWG streams, an AbortSignal follower and a
 * Request per call, which cost the mesh's calls to agents about half a millisecond each (two per delivery) against
 * this. A JSON answer is read whole and handed over as a Response over its bytes; an event stream
 * (`text/event-stream`, the streaming methods) is handed over as it arrives. Both are read with a cap,
 * `maxAnswerBytes`: a JSON answer whole, a stream per event (a stream lives as long as its task, its events are
 * what is held at once). Past it the read is aborted with AgentAnswerTooLarge, so an agent (or whatever answers at
 * its URL) cannot make the mesh hold an answer of any size in memory.
 */
export function requestFetch(dispatcher: Dispatcher, maxAnswerBytes: number): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = input instanceof Request ? input.url : String(input);
    const answer = await request(url, {
      method: (init.method ?? 'GET') as Dispatcher.HttpMethod,
      headers: Object.fromEntries(new Headers(init.headers)),
      body: init.body as string | Uint8Array | null | undefined,
      signal: init.signal ?? undefined,
      dispatcher,
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      for (const each of value === undefined ? [] : Array.isArray(value) ? value : [value]) headers.append(name, each);
    }
    const status = answer.statusCode;
    if (NO_BODY.has(status) || init.method === 'HEAD') {
      await answer.body.dump();
      return new Response(null, { status, headers });
    }
    if ((headers.get('content-type') ?? '').includes('text/event-stream')) {
      return new Response(Readable.toWeb(cappedEvents(answer.body, maxAnswerBytes)) as ReadableStream<Uint8Array>, {
        status,
        headers,
      });
    }
    return new Response(await readCapped(answer.body, maxAnswerBytes), { status, headers });
  }) as typeof fetch;
}

/** The whole body, or AgentAnswerTooLarge as soon as it is known to be over `limit` (the rest is not read). */
async function readCapped(body: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > limit) {
      body.destroy();
      throw new AgentAnswerTooLarge(limit, 'answer');
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, length);
}

/**
 * The event stream as it arrives, failed with AgentAnswerTooLarge once one event (the bytes since the last blank
 * line) passes `limit`. A carriage return is ignored, so CRLF lines end events as LF ones do.
 */
function cappedEvents(body: Readable, limit: number): Readable {
  let inEvent = 0;
  let lineEnded = false;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      for (let i = 0; i < chunk.length; i++) {
        const byte = chunk[i];
        if (byte === 0x0a) {
          if (lineEnded) inEvent = 0;
          lineEnded = true;
        } else if (byte !== 0x0d) {
          lineEnded = false;
          if (++inEvent > limit) return done(new AgentAnswerTooLarge(limit, 'stream event'));
        }
      }
      done(null, chunk);
    },
  });
  // An error either way ends both: the agent's connection is closed when the cap is passed.
  return pipeline(body, counter, () => undefined);
}

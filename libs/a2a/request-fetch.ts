import { Readable } from 'node:stream';
import { request, type Dispatcher } from 'undici';

/** Statuses whose answer has no body (a Response refuses one). */
const NO_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * A `fetch` for the SDK's A2A clients, on undici's `request` API through `dispatcher` (the sink guard's pinned
 * connector). The SDK takes any fetch; undici's own `fetch` builds WHATWG streams, an AbortSignal follower and a
 * Request per call, which cost the mesh's calls to agents about half a millisecond each (two per delivery) against
 * this. A JSON answer is read whole and handed over as a Response over its bytes; an event stream
 * (`text/event-stream`, the streaming methods) is handed over as it arrives.
 */
export function requestFetch(dispatcher: Dispatcher): typeof fetch {
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
      return new Response(Readable.toWeb(answer.body) as ReadableStream<Uint8Array>, { status, headers });
    }
    return new Response(Buffer.from(await answer.body.arrayBuffer()), { status, headers });
  }) as typeof fetch;
}

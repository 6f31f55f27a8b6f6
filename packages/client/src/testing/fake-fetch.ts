/**
 * A scripted `fetch` for the SDK's unit tests: each call is recorded and answered by the next scripted reply.
 * `GET /limits` (the publisher's read of the runtime's bounds) is answered apart, by `limits` (default: 404, so the
 * client's own bounds hold), and recorded in `limitReads` instead of `sent`.
 */
export interface SentRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
}

export type Reply = { status: number; body?: unknown; headers?: Record<string, string> } | { reset: true };

export function fakeFetch(
  replies: Reply[] | ((req: SentRequest) => Reply),
  limits: () => Reply = () => ({ status: 404, body: { code: 'NOT_FOUND' } }),
): {
  fetch: typeof fetch;
  sent: SentRequest[];
  limitReads: SentRequest[];
} {
  const sent: SentRequest[] = [];
  const limitReads: SentRequest[] = [];
  const next = Array.isArray(replies) ? () => replies.shift() ?? { status: 500 } : replies;
  const fake = async (url: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const req = {
      url: String(url),
      method: init.method ?? 'GET',
      headers: { ...(init.headers as Record<string, string>) },
      body: String(init.body ?? ''),
    };
    const readsLimits = new URL(req.url).pathname === '/limits';
    (readsLimits ? limitReads : sent).push(req);
    const reply = readsLimits ? limits() : next(req);
    if ('reset' in reply)
      throw new TypeError('fetch failed', {
        cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }),
      });
    const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
    return new Response(reply.status === 204 ? null : text, {
      status: reply.status,
      headers: { 'content-type': 'application/json', ...reply.headers },
    });
  };
  return { fetch: fake as typeof fetch, sent, limitReads };
}

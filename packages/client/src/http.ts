import { ConnectionError, errorOf, EventMeshError } from './errors';
import type { EventMeshClientOptions } from './options';
import { backoffDelay, RETRY_DEFAULTS, retryAfterMs, sleep, type RetryOptions } from './retry';

export interface HttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined>;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /**
   * Whether sending it twice is harmless, so a connection reset (no answer: it may have been taken) is retried.
   * A publish is, since it is retried with the same event ids and subscribers dedupe; a create is not.
   * 429 with `Retry-After` and 503 are retried either way: the runtime took nothing, or says `maybeWritten`
   * for a publish, which the same ids make harmless.
   */
  idempotent: boolean;
  signal?: AbortSignal;
  /** Resolve a 2xx answer with its body unread (`body`), for a stream. */
  stream?: boolean;
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  /** The body's text; empty for a 2xx `stream` answer. */
  text: string;
  /** A 2xx `stream` answer's body. */
  body?: ReadableStream<Uint8Array>;
}

/** One HTTP exchange with the gateway: auth headers, bounded retries of what is retryable, typed errors for the rest. */
export class HttpClient {
  private readonly retry: Required<RetryOptions>;
  private readonly fetch: typeof fetch;
  private readonly base: string;

  constructor(private readonly options: EventMeshClientOptions) {
    this.retry = { ...RETRY_DEFAULTS, ...options.retry };
    this.fetch = options.fetch ?? globalThis.fetch;
    this.base = options.url.replace(/\/+$/, '');
  }

  /** The URL of `path` with `query` (undefined values left out). */
  urlOf(path: string, query: HttpRequest['query'] = {}): string {
    const url = new URL(this.base + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
    return url.toString();
  }

  /** The auth headers of the next request (the token callback is called each time). */
  async authHeaders(): Promise<Record<string, string>> {
    const headers: Record<string, string> = {};
    const token = typeof this.options.token === 'function' ? await this.options.token() : this.options.token;
    if (token) headers.authorization = `Bearer ${token}`;
    if (this.options.apiKey) headers['x-api-key'] = this.options.apiKey;
    return headers;
  }

  /** Sends `req`, retrying what is retryable; resolves with a 2xx answer, else rejects with the typed error. */
  async send(req: HttpRequest): Promise<HttpAnswer> {
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.attempt(req);
      const last = attempt >= this.retry.maxAttempts || req.signal?.aborted;
      if ('answer' in outcome) {
        const { answer } = outcome;
        if (answer.status < 300) return answer;
        const error = errorOf(answer.status, parseBody(answer.text));
        if (last || !retryableStatus(answer)) throw error;
        await sleep(backoffDelay(attempt, this.retry, retryAfterMs(answer.headers.get('retry-after'))));
      } else {
        if (last || !req.idempotent) throw outcome.error;
        await sleep(backoffDelay(attempt, this.retry));
      }
    }
  }

  private async attempt(req: HttpRequest): Promise<{ answer: HttpAnswer } | { error: EventMeshError }> {
    const headers = { ...this.options.headers, ...(await this.authHeaders()), ...req.headers };
    try {
      const res = await this.fetch(this.urlOf(req.path, req.query), {
        method: req.method,
        headers,
        body: req.body,
        signal: req.signal,
      });
      if (req.stream && res.ok)
        return { answer: { status: res.status, headers: res.headers, text: '', body: res.body ?? undefined } };
      return { answer: { status: res.status, headers: res.headers, text: await res.text() } };
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      const reason = cause?.code ?? cause?.message ?? (e as Error).message;
      return {
        error: new ConnectionError(
          'CONNECTION_FAILED',
          `no answer from ${this.base}: ${reason}`,
          undefined,
          {},
          { cause: e },
        ),
      };
    }
  }
}

/** 503 (shed, Kafka unavailable, shutting down: nothing or `maybeWritten`) and 429 with `Retry-After` come back later; other 4xx never. */
function retryableStatus(answer: HttpAnswer): boolean {
  return answer.status === 503 || (answer.status === 429 && answer.headers.has('retry-after'));
}

export function parseBody(text: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
  } catch {
    return { message: text };
  }
}

import { ConnectionError, errorOf, EventMeshError } from './errors';
import type { EventMeshClientOptions } from './options';
import { backoffDelay, retryAfterMs, retryOptionsOf, sleep, type RetryOptions } from './retry';

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
  /**
   * How long one attempt waits for its whole answer (none when undefined); then it is a `ConnectionError` `TIMEOUT`,
   * retried like a reset when `idempotent`. For a `stream` request it bounds the wait for the headers only.
   */
  timeoutMs?: number;
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
    this.retry = retryOptionsOf(options.retry);
    this.fetch = options.fetch ?? globalThis.fetch;
    this.base = options.url.replace(/\/+$/, '');
  }

  /** `retry.attemptTimeoutMs`: the timeout of one attempt of a publish (a `request` adds its reply wait to it). */
  get attemptTimeoutMs(): number {
    return this.retry.attemptTimeoutMs;
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
        // A Retry-After past the bound is not waited for: the caller gets the refusal now.
        const after = retryAfterMs(answer.headers.get('retry-after'));
        if (after > this.retry.maxRetryAfterMs) throw error;
        await sleep(backoffDelay(attempt, this.retry, after), req.signal);
        // Aborted during the wait: the caller gets the refusal now, not another attempt.
        if (req.signal?.aborted) throw error;
      } else {
        if (last || !req.idempotent) throw outcome.error;
        await sleep(backoffDelay(attempt, this.retry), req.signal);
        if (req.signal?.aborted) throw outcome.error;
      }
    }
  }

  private async attempt(req: HttpRequest): Promise<{ answer: HttpAnswer } | { error: EventMeshError }> {
    const headers = { ...this.options.headers, ...(await this.authHeaders()), ...req.headers };
    // The attempt's own signal: the caller's, and the timeout's when the request has one (its timer always cleared).
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    let signal = req.signal;
    let unlink = () => {};
    if (req.timeoutMs !== undefined) {
      const aborter = new AbortController();
      const abort = () => aborter.abort(req.signal?.reason);
      if (req.signal?.aborted) abort();
      else req.signal?.addEventListener('abort', abort, { once: true });
      unlink = () => req.signal?.removeEventListener('abort', abort);
      timer = setTimeout(() => {
        timedOut = true;
        aborter.abort();
      }, req.timeoutMs);
      signal = aborter.signal;
    }
    try {
      const res = await this.fetch(this.urlOf(req.path, req.query), {
        method: req.method,
        headers,
        body: req.body,
        signal,
      });
      if (req.stream && res.ok) {
        // The body is read later: the caller's signal still ends it.
        unlink = () => {};
        return { answer: { status: res.status, headers: res.headers, text: '', body: res.body ?? undefined } };
      }
      return { answer: { status: res.status, headers: res.headers, text: await res.text() } };
    } catch (e) {
      if (timedOut)
        return {
          error: new ConnectionError(
            'TIMEOUT',
            `no answer from ${this.base} within ${String(req.timeoutMs)} ms`,
            undefined,
            {},
            { cause: e },
          ),
        };
      const cause = (e as { cause?: { code?: string; message?: string } } | undefined)?.cause;
      const reason = cause?.code ?? cause?.message ?? (e instanceof Error ? e.message : String(e));
      return {
        error: new ConnectionError(
          'CONNECTION_FAILED',
          `no answer from ${this.base}: ${reason}`,
          undefined,
          {},
          { cause: e },
        ),
      };
    } finally {
      clearTimeout(timer);
      unlink();
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

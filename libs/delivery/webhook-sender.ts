import { createHmac } from 'node:crypto';
import { Agent, Dispatcher, errors } from 'undici';
import type { EventMeshConfig } from '@libs/config';
import { cloudEventsBinary, EventFrame } from '@libs/frame';
import { SecretBox, signingKeyOf, SinkGuard, SinkNotAllowed } from '@libs/security';
import { eventTraceOf, TraceHeaders } from '@libs/tracing';
import { BATCH_CONTENT_TYPE, batchBodyOf, batchEntryOf, batchSettingsOf, type OutBatch } from './webhook-batch';

export interface WebhookTarget {
  protocol?: string;
  sink: string;
  /**
   * The Standard Webhooks secret (`whsec_...`) as stored: sealed by the SecretBox (a secret an earlier version
   * stored in the clear is used as it is, until the next boot seals it); unsigned when absent.
   */
  signingSecret: string | null;
  /** The subscription's config: with `batch` (webhook-batch.ts) every delivery goes in batch content mode. */
  config?: unknown;
}

export interface WebhookResult {
  ok: boolean;
  status?: number;
  error?: string;
  /** The sink asked for a pause (429 or 503 with Retry-After), in milliseconds. */
  retryAfterMs?: number;
  /** The sink answered 410 Gone: it wants no more events. */
  gone?: boolean;
  /** The receiver refused the event for good (a stream client's reject): straight to the dead-letter queue. */
  rejected?: boolean;
  /** Nobody was there to try (a stream client disconnected): try again soon, without counting an attempt. */
  notAttempted?: boolean;
}

/** Longest Retry-After honoured; a sink cannot park a subscription for days with one header. */
const MAX_RETRY_AFTER_MS = 60 * 60 * 1000;

/**
 * Webhook push: one HTTP POST per event in CloudEvents binary mode, signed with the Standard Webhooks scheme
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature`: HMAC-SHA256 over `id.timestamp.body` with the
 * subscription's secret), with a per-request timeout. 2xx is the acknowledgement; 429 and 503 may carry a
 * Retry-After; 410 means the sink is gone. Every connection goes through the SSRF guard: the sink's host is
 * resolved and checked and the connection made to the checked address; redirects are not followed. The request
 * continues the event's trace (W3C `traceparent` and `tracestate` headers): the delivery span's context when
 * tracing is on, else the event's own distributed-tracing extension as it is (docs/operations.md#tracing).
 */
export class WebhookSender {
  /**
   * Signing keys by stored (sealed) secret: opened once, the bytes after `whsec_` base64-decoded, as the Standard
   * Webhooks scheme defines. In memory only; bounded.
   */
  private readonly keys = new Map<string, Buffer>();
  /**
   * Keep-alive connections per sink origin. undici's `request` rather than `fetch`: the same client without the
   * WHATWG stream and header machinery, several times cheaper per request (docs/benchmarks.md).
   */
  private readonly agent: Agent;

  constructor(
    private readonly timeoutMs: number,
    private readonly guard: { secrets: SecretBox; sinks: SinkGuard },
  ) {
    this.agent = guard.sinks.agent({ keepAliveTimeout: 30_000, connections: 64 });
  }

  /** A sink URL's origin and path, parsed once (undici's top-level `request` parses the URL on every call). */
  private readonly targets = new Map<string, { origin: string; path: string }>();

  private targetOf(sink: string): { origin: string; path: string } {
    let target = this.targets.get(sink);
    if (!target) {
      const url = new URL(sink);
      target = { origin: url.origin, path: `${url.pathname}${url.search}` };
      if (this.targets.size >= MAX_KEYS) this.targets.delete(this.targets.keys().next().value!);
      this.targets.set(sink, target);
    }
    return target;
  }

  /** The sender of an instance: its webhook timeout, secrets and sink ranges from the configuration. */
  static forInstance(config: EventMeshConfig): WebhookSender {
    return new WebhookSender(config.delivery.webhookTimeoutMs, {
      secrets: SecretBox.fromConfig(config),
      sinks: SinkGuard.fromConfig(config),
    });
  }

  /**
   * `messageId` is stable across retries of the same delivery, as the Standard Webhooks scheme asks. `trace`: the
   * delivery span's context (tracing on); absent, the event's own trace context goes as it is.
   */
  send(
    target: WebhookTarget,
    frame: EventFrame,
    messageId: string,
    signal?: AbortSignal,
    trace?: TraceHeaders,
  ): Promise<WebhookResult> {
    // A webhook gets an event in the CloudEvents HTTP binary mode, written by that protocol's adaptor (libs/frame). A
    // batched subscription's sink takes batches only: a single event (a parked one, one isolated by a split) goes as
    // a batch of one.
    const batched = batchSettingsOf(target) !== undefined;
    const { headers, body } = batched
      ? { headers: { 'content-type': BATCH_CONTENT_TYPE }, body: batchBodyOf([batchEntryOf(frame)]) }
      : cloudEventsBinary.encode(frame, 'http');
    const context = trace ?? eventTraceOf(frame);
    if (context) {
      headers.traceparent = context.traceparent;
      if (context.tracestate !== undefined) headers.tracestate = context.tracestate;
    }
    return this.post(target, headers, body, messageId, signal);
  }

  /**
   * Events in CloudEvents batch content mode: the batch's `entries` are the events in structured JSON
   * (webhook-batch.ts), the body their JSON array, signed once (one `webhook-id`, `messageId`, and one signature over the bytes sent). Each
   * event carries its own trace context in its attributes; the request has none of its own.
   */
  sendBatch(
    target: WebhookTarget,
    { entries }: Pick<OutBatch, 'entries'>,
    messageId: string,
    signal?: AbortSignal,
  ): Promise<WebhookResult> {
    return this.post(target, { 'content-type': BATCH_CONTENT_TYPE }, batchBodyOf(entries), messageId, signal);
  }

  /**
   * A body that is not an event (an A2A push notification, libs/a2a/push/task-pushes.ts) POSTed the same way as an
   * event: signed, through the SSRF guard, with the timeouts; `headers` are the caller's (its content type, the
   * receiver's token). `messageId` is stable across retries of the same delivery.
   */
  sendBody(
    target: WebhookTarget,
    body: Buffer,
    headers: Record<string, string>,
    messageId: string,
    signal?: AbortSignal,
  ): Promise<WebhookResult> {
    return this.post(target, { ...headers }, body, messageId, signal);
  }

  private async post(
    target: WebhookTarget,
    headers: Record<string, string>,
    body: Buffer | undefined,
    messageId: string,
    signal?: AbortSignal,
  ): Promise<WebhookResult> {
    if (target.signingSecret) {
      let key: Buffer;
      try {
        key = this.keyOf(target.signingSecret);
      } catch (e) {
        // Never sent unsigned: the delivery fails (and is retried) until the key is configured again.
        return { ok: false, error: `the signing secret cannot be opened: ${(e as Error).message}` };
      }
      const timestamp = String(Math.floor(Date.now() / 1000));
      headers['webhook-id'] = messageId;
      headers['webhook-timestamp'] = timestamp;
      headers['webhook-signature'] = sign(key, messageId, timestamp, body);
    }
    const answer = await new Promise<Answer>((resolve) => {
      const post = new Post(resolve, signal);
      if (post.settled) return;
      try {
        const { origin, path } = this.targetOf(target.sink);
        // The timeouts bound the wait for the answer's headers and for each chunk of its body.
        this.agent.dispatch(
          { origin, path, method: 'POST', headers, body, headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs },
          post,
        );
      } catch (e) {
        post.onError(e as Error);
      }
    });
    if (answer.error) {
      const e = answer.error;
      if (e instanceof SinkNotAllowed) return { ok: false, error: e.message };
      const timedOut = e instanceof errors.HeadersTimeoutError || e instanceof errors.BodyTimeoutError;
      return { ok: false, error: timedOut ? `no answer within ${this.timeoutMs} ms` : describe(e) };
    }
    const status = answer.status;
    if (status >= 200 && status < 300) return { ok: true, status };
    const result: WebhookResult = { ok: false, status, error: `HTTP ${status}` };
    if (status === 410) result.gone = true;
    if (status === 429 || status === 503) result.retryAfterMs = parseRetryAfter(answer.retryAfter);
    return result;
  }

  /** The HMAC key of a stored secret, opened once and remembered (in memory only). */
  private keyOf(stored: string): Buffer {
    let key = this.keys.get(stored);
    if (!key) {
      key = signingKeyOf(SecretBox.isSealed(stored) ? this.guard.secrets.open(stored) : stored);
      if (this.keys.size >= MAX_KEYS) this.keys.delete(this.keys.keys().next().value!);
      this.keys.set(stored, key);
    }
    return key;
  }

  /** Closes the keep-alive connections (instance shutdown). */
  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** What a POST came to: the final status (and Retry-After), or the error that ended it. */
interface Answer {
  status: number;
  retryAfter: string | null;
  error?: Error;
}

/**
 * Sends in flight by the signal that aborts them. A lane's sends share one signal (built once per lane and gate
 * period), so each signal gets one listener however many sends it covers, rather than one per send.
 */
const inFlight = new WeakMap<AbortSignal, Set<Post>>();

function abortAll(this: AbortSignal): void {
  const posts = inFlight.get(this);
  if (!posts) return;
  inFlight.delete(this);
  for (const post of posts) post.cancel(abortReason(this));
}

const abortReason = (signal: AbortSignal): Error =>
  signal.reason instanceof Error ? signal.reason : new errors.RequestAbortedError();

/**
 * One POST on undici's dispatch API: the answer's status, its Retry-After when it matters, and nothing of its body
 * (read and dropped). `Agent.request` does the same with an `AsyncResource`, a body stream and an abort listener
 * per request; this costs none of them (docs/benchmarks.md#delivery-one-instance-against-a-consumer-group-npm-run-benchdelivery).
 * Aborted by `signal`: before the request has a connection it is never written; after, its connection is
 * destroyed, as undici's own abort does.
 */
class Post implements Dispatcher.DispatchHandlers {
  settled = false;
  private abort?: (e?: Error) => void;
  private reason?: Error;
  private status = 0;
  private retryAfter: string | null = null;

  constructor(
    private readonly resolve: (answer: Answer) => void,
    private readonly signal?: AbortSignal,
  ) {
    if (!signal) return;
    if (signal.aborted) {
      this.onError(abortReason(signal));
      return;
    }
    let posts = inFlight.get(signal);
    if (!posts) {
      posts = new Set();
      inFlight.set(signal, posts);
      signal.addEventListener('abort', abortAll, { once: true });
    }
    posts.add(this);
  }

  cancel(reason: Error): void {
    if (this.settled || this.reason) return;
    this.reason = reason;
    if (this.abort) this.abort(reason);
  }

  onConnect(abort: (e?: Error) => void): void {
    if (this.reason) abort(this.reason);
    else this.abort = abort;
  }

  onHeaders(statusCode: number, headers: Buffer[]): boolean {
    // 1xx answers come first, each with its headers; the last call has the final status.
    this.status = statusCode;
    if (statusCode === 429 || statusCode === 503) {
      for (let i = 0; i + 1 < headers.length; i += 2) {
        if (headers[i].length === 11 && headers[i].toString('latin1').toLowerCase() === 'retry-after')
          this.retryAfter = headers[i + 1].toString('latin1');
      }
    }
    return true;
  }

  onData(): boolean {
    return true;
  }

  onComplete(): void {
    this.end({ status: this.status, retryAfter: this.retryAfter });
  }

  onError(error: Error): void {
    this.end({ status: 0, retryAfter: null, error });
  }

  private end(answer: Answer): void {
    if (this.settled) return;
    this.settled = true;
    if (this.signal) inFlight.get(this.signal)?.delete(this);
    this.resolve(answer);
  }
}

/** Most opened signing keys remembered (one per subscription this process delivers). */
const MAX_KEYS = 100_000;

/**
 * `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under the subscription's key: the Standard Webhooks
 * signature. Computed with node:crypto rather than the `standardwebhooks` package, whose pure-JS SHA-256 costs
 * 5x more per event (15.8 µs against 2.8 µs for 1 KiB); the end-to-end test verifies these signatures with
 * that package.
 */
function sign(key: Buffer, id: string, timestamp: string, body: Buffer | undefined): string {
  const hmac = createHmac('sha256', key).update(`${id}.${timestamp}.`);
  if (body) hmac.update(body);
  return `v1,${hmac.digest('base64')}`;
}

/** Retry-After as delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  const ms = /^\d+$/.test(trimmed) ? Number(trimmed) * 1000 : Date.parse(trimmed) - now;
  if (!Number.isFinite(ms)) return undefined;
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
}

function describe(e: unknown): string {
  const err = e as Error & { cause?: { code?: string; message?: string } };
  return err.cause?.code ?? err.cause?.message ?? err.message ?? String(e);
}

import { createHmac } from 'node:crypto';
import { Agent, errors } from 'undici';
import type { EventMeshConfig } from '../config';
import { EventFrame, frameToHttpBinary } from '../frame';
import { SecretBox, signingKeyOf, SinkGuard, SinkNotAllowed } from '../security';
import { eventTraceOf, TraceHeaders } from '../tracing';

export interface WebhookTarget {
  protocol?: string;
  sink: string;
  /**
   * The Standard Webhooks secret (`whsec_...`) as stored: sealed by the SecretBox (a secret an earlier version
   * stored in the clear is used as it is, until the next boot seals it); unsigned when absent.
   */
  signingSecret: string | null;
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
    return new WebhookSender(config.delivery.webhookTimeoutMs, { secrets: SecretBox.fromConfig(config), sinks: SinkGuard.fromConfig(config) });
  }

  /**
   * `messageId` is stable across retries of the same delivery, as the Standard Webhooks scheme asks. `trace`: the
   * delivery span's context (tracing on); absent, the event's own trace context goes as it is.
   */
  async send(target: WebhookTarget, frame: EventFrame, messageId: string, signal?: AbortSignal, trace?: TraceHeaders): Promise<WebhookResult> {
    const { headers, body } = frameToHttpBinary(frame);
    const context = trace ?? eventTraceOf(frame);
    if (context) {
      headers.traceparent = context.traceparent;
      if (context.tracestate !== undefined) headers.tracestate = context.tracestate;
    }
    return this.post(target, headers, body, messageId, signal);
  }

  /**
   * A body that is not an event (an A2A push notification, libs/a2a/task-pushes.ts) POSTed the same way as an
   * event: signed, through the SSRF guard, with the timeouts; `headers` are the caller's (its content type, the
   * receiver's token). `messageId` is stable across retries of the same delivery.
   */
  async sendBody(target: WebhookTarget, body: Buffer, headers: Record<string, string>, messageId: string, signal?: AbortSignal): Promise<WebhookResult> {
    return this.post(target, { ...headers }, body, messageId, signal);
  }

  private async post(target: WebhookTarget, headers: Record<string, string>, body: Buffer | undefined, messageId: string, signal?: AbortSignal): Promise<WebhookResult> {
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
    try {
      // The timeouts bound the wait for the answer's headers and for each chunk of its body.
      const { origin, path } = this.targetOf(target.sink);
      const response = await this.agent.request({
        origin,
        path,
        method: 'POST',
        headers,
        body,
        signal,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      await response.body.dump();
      const status = response.statusCode;
      if (status >= 200 && status < 300) return { ok: true, status };
      const result: WebhookResult = { ok: false, status, error: `HTTP ${status}` };
      if (status === 410) result.gone = true;
      if (status === 429 || status === 503) {
        const retryAfter = response.headers['retry-after'];
        result.retryAfterMs = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : (retryAfter ?? null));
      }
      return result;
    } catch (e) {
      if (e instanceof SinkNotAllowed) return { ok: false, error: e.message };
      const timedOut = e instanceof errors.HeadersTimeoutError || e instanceof errors.BodyTimeoutError;
      return { ok: false, error: timedOut ? `no answer within ${this.timeoutMs} ms` : describe(e) };
    }
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

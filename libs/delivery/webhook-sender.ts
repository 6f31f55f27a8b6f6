import { Webhook } from 'standardwebhooks';
import { Agent, request } from 'undici';
import { EventFrame, frameToHttpBinary } from '../frame';

export interface WebhookTarget {
  protocol?: string;
  sink: string;
  /** The Standard Webhooks secret (`whsec_...`); unsigned when absent. */
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
 * Retry-After; 410 means the sink is gone.
 */
export class WebhookSender {
  private readonly signers = new Map<string, Webhook>();
  /**
   * Keep-alive connections per sink origin. undici's `request` rather than `fetch`: the same client without the
   * WHATWG stream and header machinery, several times cheaper per request (docs/benchmarks.md).
   */
  private readonly agent = new Agent({ keepAliveTimeout: 30_000, connections: 64 });

  constructor(private readonly timeoutMs: number) {}

  /** `messageId` is stable across retries of the same delivery, as the Standard Webhooks scheme asks. */
  async send(target: WebhookTarget, frame: EventFrame, messageId: string, signal?: AbortSignal): Promise<WebhookResult> {
    const { headers, body } = frameToHttpBinary(frame);
    if (target.signingSecret) {
      const timestamp = new Date();
      headers['webhook-id'] = messageId;
      headers['webhook-timestamp'] = String(Math.floor(timestamp.getTime() / 1000));
      headers['webhook-signature'] = this.signer(target.signingSecret).sign(messageId, timestamp, body ?? Buffer.alloc(0));
    }
    // One controller per send, its timer cleared and its listener removed when the send ends: nothing outlives it.
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.timeoutMs);
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const response = await request(target.sink, { method: 'POST', headers, body, signal: controller.signal, dispatcher: this.agent });
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
      return { ok: false, error: timedOut ? `no answer within ${this.timeoutMs} ms` : describe(e) };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Closes the keep-alive connections (instance shutdown). */
  async close(): Promise<void> {
    await this.agent.close();
  }

  private signer(secret: string): Webhook {
    let signer = this.signers.get(secret);
    if (!signer) {
      signer = new Webhook(secret);
      this.signers.set(secret, signer);
    }
    return signer;
  }
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

import { EventFrame, frameToHttpBinary } from '../frame';

export interface WebhookResult {
  ok: boolean;
  status?: number;
  error?: string;
}

/**
 * Webhook push: one HTTP POST per event in CloudEvents binary mode, with a per-request timeout. A 2xx answer is
 * the acknowledgement; anything else, or no answer in time, is a failed attempt.
 */
export class WebhookSender {
  constructor(private readonly timeoutMs: number) {}

  async send(sink: string, frame: EventFrame, signal?: AbortSignal): Promise<WebhookResult> {
    const { headers, body } = frameToHttpBinary(frame);
    const timeout = AbortSignal.timeout(this.timeoutMs);
    try {
      const response = await fetch(sink, {
        method: 'POST',
        headers,
        body,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        redirect: 'manual',
      });
      await response.body?.cancel();
      const ok = response.status >= 200 && response.status < 300;
      return ok ? { ok, status: response.status } : { ok, status: response.status, error: `HTTP ${response.status}` };
    } catch (e) {
      const error = timeout.aborted ? `no answer within ${this.timeoutMs} ms` : describe(e);
      return { ok: false, error };
    }
  }
}

function describe(e: unknown): string {
  const err = e as Error & { cause?: { code?: string; message?: string } };
  return err.cause?.code ?? err.cause?.message ?? err.message ?? String(e);
}

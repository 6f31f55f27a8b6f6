import { ErrorCode, EventMeshError } from '../errors';

/**
 * The CloudEvents webhook abuse protection handshake (HTTP 1.1 Web Hooks for Event Delivery, section 4): before
 * a new webhook target gets events, it is asked with `OPTIONS` and a `WebHook-Request-Origin` header whether it
 * accepts deliveries from this origin, and must answer 2xx with `WebHook-Allowed-Origin` naming the origin or
 * `*`. The asynchronous variant (`WebHook-Request-Callback`) is not offered.
 */
export async function validateWebhookTarget(sink: string, origin: string, timeoutMs: number): Promise<void> {
  let response: Response;
  try {
    response = await fetch(sink, {
      method: 'OPTIONS',
      headers: { 'WebHook-Request-Origin': origin, 'WebHook-Request-Rate': '*' },
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'manual',
    });
    await response.body?.cancel();
  } catch (e) {
    throw refused(sink, `the sink did not answer the validation request: ${(e as Error).message}`);
  }
  if (response.status < 200 || response.status >= 300) {
    throw refused(sink, `the sink answered the validation request with HTTP ${response.status}`, response.status);
  }
  const allowed = response.headers.get('webhook-allowed-origin');
  if (allowed !== '*' && allowed !== origin) {
    throw refused(
      sink,
      `the sink did not allow origin "${origin}" (WebHook-Allowed-Origin: ${allowed ?? 'absent'}); ` +
        'answer the OPTIONS handshake or create the subscription with config.trusted = true',
      response.status,
    );
  }
}

function refused(sink: string, message: string, status?: number): EventMeshError {
  return new EventMeshError(ErrorCode.WebhookValidationFailed, message, { sink, ...(status ? { status } : {}) });
}

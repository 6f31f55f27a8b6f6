import { Dispatcher, request } from 'undici';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { createLogger } from '@libs/logging';
import { SinkNotAllowed } from '@libs/security';

const log = createLogger('WebhookHandshake');

/**
 * The CloudEvents webhook abuse protection handshake (HTTP 1.1 Web Hooks for Event Delivery, section 4): before
 * a new webhook target gets events, it is asked with `OPTIONS` and a `WebHook-Request-Origin` header whether it
 * accepts deliveries from this origin, and must answer 2xx with `WebHook-Allowed-Origin` naming the origin or
 * `*`. The asynchronous variant (`WebHook-Request-Callback`) is not offered. `dispatcher` connects (the SSRF
 * guard's pinned agent); a redirect is an answer like any other non-2xx, never followed.
 */
export async function validateWebhookTarget(
  sink: string,
  origin: string,
  timeoutMs: number,
  dispatcher: Dispatcher,
): Promise<void> {
  let status: number;
  let allowedHeader: string | string[] | undefined;
  try {
    const response = await request(sink, {
      method: 'OPTIONS',
      headers: { 'WebHook-Request-Origin': origin, 'WebHook-Request-Rate': '*' },
      signal: AbortSignal.timeout(timeoutMs),
      dispatcher,
    });
    await response.body.dump();
    status = response.statusCode;
    allowedHeader = response.headers['webhook-allowed-origin'];
  } catch (e) {
    // The guard refused the address at connect time (the name resolved elsewhere than at the check).
    if (e instanceof SinkNotAllowed) throw e;
    // One answer for every way of not answering: a refused connection, a reset and a timeout told apart would let
    // a tenant scan ports of any host the guard allows through this runtime. The operator reads which in the log.
    const error = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
    log.info(
      { sink, error: error.message, code: error.code ?? error.cause?.code ?? error.name },
      'webhook sink did not answer the validation request',
    );
    throw refused(sink, 'the sink did not answer the validation request');
  }
  if (status < 200 || status >= 300) {
    throw refused(sink, `the sink answered the validation request with HTTP ${status}`, status);
  }
  const allowed = Array.isArray(allowedHeader) ? allowedHeader[0] : allowedHeader;
  if (allowed !== '*' && allowed !== origin) {
    throw refused(
      sink,
      `the sink did not allow origin "${origin}" (WebHook-Allowed-Origin: ${allowed ?? 'absent'}); ` +
        'answer the OPTIONS handshake or create the subscription with config.trusted = true',
      status,
    );
  }
}

function refused(sink: string, message: string, status?: number): EventMeshError {
  return new EventMeshError(ErrorCode.WebhookValidationFailed, message, { sink, ...(status ? { status } : {}) });
}

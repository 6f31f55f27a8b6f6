/**
 * Errors of the SDK. Every failure the runtime answered carries its JSON body: `code` (stable, machine-readable),
 * `message`, and, for a refused field, `field`; `status` is the HTTP status. Subclasses let a caller `catch` by
 * kind (`instanceof AuthError`) without comparing strings; `code` stays the precise reason.
 */
export class EventMeshError extends Error {
  override readonly name: string = 'EventMeshError';
  /** The runtime's error code (`INVALID_CLOUDEVENT`, `QUOTA_EXCEEDED`, ...), or the SDK's own (`CONNECTION_FAILED`, ...). */
  readonly code: string;
  /** The HTTP status of the answer; undefined when no answer came. */
  readonly status?: number;
  /** The request field the runtime refused, when it names one. */
  readonly field?: string;
  /** The runtime's whole error body (its details: `index`, `limit`, `maybeWritten`, ...). */
  readonly body: Record<string, unknown>;

  constructor(
    code: string,
    message: string,
    status?: number,
    body: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.code = code;
    this.status = status;
    this.body = body;
    this.field = typeof body.field === 'string' ? body.field : undefined;
  }
}

/** 401 or 403: the credential is missing, invalid, or not allowed. Never retried. */
export class AuthError extends EventMeshError {
  override readonly name = 'AuthError';
}

/** 400 or 415: the request (an event, a subscription spec) is malformed. Never retried; `field`/`body.index` say where. */
export class ValidationError extends EventMeshError {
  override readonly name = 'ValidationError';
}

/** 404: no such topic, subscription, or pending request. */
export class NotFoundError extends EventMeshError {
  override readonly name: string = 'NotFoundError';
}

/** 409: the request conflicts with the state (`UNKNOWN_DELIVERY`, `SUBSCRIPTION_DISABLED`, ...). */
export class ConflictError extends EventMeshError {
  override readonly name: string = 'ConflictError';
}

/** 408 on `request()`: no reply came within `timeoutMs`. `body.correlationId` names the request. */
export class RequestTimeoutError extends EventMeshError {
  override readonly name = 'RequestTimeoutError';
}

/** 413: the body or batch is larger than the runtime takes (`PAYLOAD_TOO_LARGE`, `BATCH_EXCEEDS_BURST`). */
export class PayloadTooLargeError extends EventMeshError {
  override readonly name: string = 'PayloadTooLargeError';
}

/** 429 or 503 still refused after the retries ran out (`QUOTA_EXCEEDED`, `OVERLOADED`, `KAFKA_UNAVAILABLE`, ...). */
export class UnavailableError extends EventMeshError {
  override readonly name = 'UnavailableError';
}

/** No answer came (connection refused or reset, DNS failure) and the retries ran out. */
export class ConnectionError extends EventMeshError {
  override readonly name: string = 'ConnectionError';
}

/**
 * Thrown by a consumer's handler to send its event straight to the subscription's dead letters (a `reject`),
 * instead of the `nack` (a retry) any other throw gets.
 */
export class RejectError extends Error {
  override readonly name = 'RejectError';
}

/** The typed error for an answer with `status` and the runtime's JSON error body. */
export function errorOf(status: number, body: Record<string, unknown>): EventMeshError {
  const code = typeof body.code === 'string' ? body.code : `HTTP_${status}`;
  const message = typeof body.message === 'string' ? body.message : `HTTP ${status}`;
  const kind =
    status === 401 || status === 403
      ? AuthError
      : status === 400 || status === 415
        ? ValidationError
        : status === 404
          ? NotFoundError
          : status === 408
            ? RequestTimeoutError
            : status === 409
              ? ConflictError
              : status === 413
                ? PayloadTooLargeError
                : status === 429 || status >= 500
                  ? UnavailableError
                  : EventMeshError;
  return new kind(code, message, status, body);
}

import type { RetryOptions } from './retry';

/** A bearer token, or a callback giving the current one (called before each request: cache and refresh in it). */
export type TokenSource = string | (() => string | Promise<string>);

/** Bounds of automatic batching and publish flow control. */
export interface PublishOptions {
  /** Events published but not yet answered, at most; a publish past it waits for room (default 1000). */
  maxEventsInFlight?: number;
  /** Bytes (JSON of the events) published but not yet answered, at most (default 16 MiB). */
  maxBytesInFlight?: number;
  /** How long a publish waits for others to share its HTTP request (default 0: the events published in the same tick share one). */
  lingerMs?: number;
  /** Events in one batch request, at most (default 500); lowered to what the runtime reports at `GET /limits`. */
  maxBatchEvents?: number;
  /** Bytes of one batch request's body, at most (default 512 KiB); lowered to what the runtime reports at `GET /limits`. */
  maxBatchBytes?: number;
}

export interface EventMeshClientOptions {
  /** The runtime's gateway, e.g. `http://127.0.0.1:3000`. */
  url: string;
  /** Sent as `Authorization: Bearer <token>`. A 401/403 is an `AuthError`, never retried. */
  token?: TokenSource;
  /** An API key (`emk_<id>_<secret>`), sent as `x-api-key`. */
  apiKey?: string;
  /** Headers added to every request (the SDK's own win). */
  headers?: Record<string, string>;
  /** The topic of `publish` and `request` when the call names none (default: the runtime's first topic). */
  topic?: string;
  /** The `source` given to an event that has none. */
  source?: string;
  publish?: PublishOptions;
  /** Retries of publishes and reads (429/503 with `Retry-After`, a connection reset, 503 `maybeWritten`). */
  retry?: RetryOptions;
  /** The `fetch` to use (default: Node's global `fetch`). */
  fetch?: typeof fetch;
}

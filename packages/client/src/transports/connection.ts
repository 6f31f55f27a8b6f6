import type { Transport } from '../consumer-types';
import { ConflictError, EventMeshError } from '../errors';
import type { HttpClient } from '../http';

import type { Answer, WireDelivery } from '../api-types';

export type { Answer, WireDelivery };

/** One open connection of a consumer to a stream subscription, whichever its transport. */
export interface Connection {
  readonly transport: Transport;
  /** Resolves `true` when the runtime took the answer, `false` when the delivery is no longer pending there (stale). */
  answer(a: Answer): Promise<boolean>;
  /** Ends it; deliveries held unanswered are given back by the runtime. */
  close(): void;
  /** Resolves when the connection ended, with why (undefined after `close`). */
  readonly ended: Promise<Error | undefined>;
}

export interface ConnectParams {
  http: HttpClient;
  subscriptionId: string;
  window: number;
  filter?: string;
  consumerName: string;
  /** WebSocket: ask for batched frames (ConsumeOptions.batchFrames). */
  batchFrames?: boolean;
  /** How far the consumer extends a delivery's deadline (undefined: it does not): a batch is extended from arrival. */
  ackDeadlineMs?: Promise<number | undefined>;
  onDelivery(d: WireDelivery): void;
}

export type Connect = (p: ConnectParams) => Promise<Connection>;

/**
 * The transport was refused while the subscription is there and the caller allowed (a proxy that does not pass a
 * WebSocket upgrade, or an SSE stream buffered away): the consumer falls back to the next transport.
 */
export class TransportRefusedError extends EventMeshError {
  override readonly name = 'TransportRefusedError';
}

/**
 * The statuses the runtime itself refuses a stream with (docs/api.md): its typed errors, never a reason to fall back.
 * Any other answer to a stream request (a 405, 501, 502 of a proxy) means the transport does not get through.
 */
export const RUNTIME_REFUSALS = [400, 401, 403, 404, 429, 503];

/** A refusal no reconnect can change: the credential, the subscription, or the request itself. */
export const isFatal = (e: unknown): boolean =>
  e instanceof EventMeshError && [400, 401, 403, 404].includes(e.status ?? 0);

/** The query every transport sends: its window, and a MULTICAST client's own filter. */
export const streamQuery = (p: ConnectParams): Record<string, string | number | undefined> => ({
  window: p.window,
  filter: p.filter,
});

export const streamPath = (p: ConnectParams, leaf: string): string =>
  `/subscriptions/${encodeURIComponent(p.subscriptionId)}/${leaf}`;

/** An answer over HTTP (`POST /subscriptions/{id}/acks`), for SSE and long-poll: 409 `UNKNOWN_DELIVERY` means stale. */
export async function postAnswer(p: ConnectParams, a: Answer): Promise<boolean> {
  try {
    await p.http.send({
      method: 'POST',
      path: streamPath(p, 'acks'),
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(a),
      idempotent: true,
    });
    return true;
  } catch (e) {
    if (e instanceof ConflictError) return false;
    throw e;
  }
}

import { ErrorCode, EventMeshError } from '@libs/errors';
import type { Caller, GateAction } from './caller';

/** One request as the gate sees it: enough for every filter to decide, never more. */
export interface GateRequest {
  /** The route as declared, e.g. `POST /events/publish`. */
  route: string;
  action: GateAction;
  /** The topic the request acts on (publish, subscription), when it has one; ACL rules match it. */
  topic?: string;
  /**
   * The topic, when it is known only from a stored resource (a subscription's): resolved once, after TokenAuth,
   * as the caller's tenant sees it, so another tenant's resource reads as no resource at all.
   */
  topicOf?: (caller: Caller) => Promise<string | undefined>;
  headers: Record<string, string | string[] | undefined>;
  remoteAddress: string;
  /**
   * The request's id, audited: its `x-request-id` when it sent a usable one, else a fresh one. Set by the gate
   * (an open gate makes none).
   */
  requestId?: string;
  /**
   * TokenAuth's verdict, decided from the headers before the body was read (SecurityGate.authenticate): the gate
   * does not ask TokenAuth again.
   */
  authenticated?: Promise<Verdict>;
  /** The exact body bytes, for the SignatureVerifier (publish, request, reply). */
  body?: Buffer;
  /** What a publish costs the tenant's quota. */
  publish?: { events: number; bytes: number };
  /** The request opens a stream connection, held until the admission is released. */
  stream?: boolean;
  /**
   * The handshake of a multiplexed connection whose every operation passes the gate on its own (a streaming
   * sessions WebSocket): TokenAuth asks for any data-path scope rather than the action's, and the ACL, which decides
   * each operation on its name, lets the connection itself through.
   */
  connection?: boolean;
  /** The request creates a subscription (the tenant's subscription quota). */
  createsSubscription?: boolean;
  /** A runtime-wide admin route: only an admin of the operator tenant (EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT) may call it. */
  operatorOnly?: boolean;
  /**
   * A route that hands out power (credentials, ACL rules, quotas, operator actions: every admin route): a gate that
   * is not open answers it only for a caller TokenAuth authenticated with the route's scope, in report-only mode too.
   */
  privileged?: boolean;
}

/**
 * A refusal by a gate filter: the status and body the caller gets (when the gate enforces), and the headers that
 * go with it (`WWW-Authenticate`, `Retry-After`, `RateLimit`). The message helps a legitimate caller and tells an
 * attacker nothing it did not send.
 */
export class GateRefusal extends EventMeshError {
  constructor(
    code:
      | ErrorCode.Unauthenticated
      | ErrorCode.Forbidden
      | ErrorCode.QuotaExceeded
      | ErrorCode.BatchExceedsBurst
      | ErrorCode.InvalidRequest,
    message: string,
    /** The reason audited and counted (a stable word: `expired`, `bad_signature`, `acl_deny`, ...). */
    readonly reason: string,
    readonly headers: Record<string, string> = {},
    details: Record<string, unknown> = {},
    /**
     * Refused in report-only mode too: the refusal of a rule the runtime cannot read (a malformed ACL rule), which
     * the contract denies to fail safe rather than let through while nobody is watching the audit.
     */
    readonly failSafe = false,
  ) {
    super(code, message, details);
  }
}

/**
 * What one filter decided. An allow may name the caller (TokenAuth), hold a resource until released (quota's
 * stream connections), and say how to give back what it charged (quota's events and bytes) when the request is
 * refused after the gate; a refusal may name the caller too, when it is known though refused (a verified token
 * lacking the route's scope).
 */
export type Verdict =
  | { allow: true; caller?: Caller; release?: () => void; refund?: () => void }
  | { allow: false; refusal: GateRefusal; caller?: Caller };

export const ALLOW: Verdict = Object.freeze({ allow: true as const });

export interface GateContext {
  request: GateRequest;
  /** The caller as far as the chain knows it: `UNAUTHENTICATED` until TokenAuth names one. */
  caller: Caller;
}

/**
 * One link of the gate's chain. A filter decides and returns; it throws only when it cannot decide (its store is
 * down), which the gate treats as a refusal in fail-closed mode and as a counted error in report-only mode.
 */
export interface GateFilter {
  readonly name: 'token' | 'signature' | 'acl' | 'quota';
  check(context: GateContext): Verdict | Promise<Verdict>;
  /** Stops timers and connections of the filter (instance shutdown). */
  close?(): Promise<void> | void;
}

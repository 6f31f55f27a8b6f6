import { ErrorCode } from '@libs/errors';
import type { Action, Caller } from './caller';
import { GateRefusal } from './gate-filter';

/** Why a credential was not accepted: the stable words audited and counted (docs/security.md). */
export type InvalidTokenReason =
  | 'malformed'
  | 'expired'
  | 'not_yet_valid'
  | 'bad_issuer'
  | 'bad_audience'
  | 'bad_signature'
  | 'unknown_key'
  | 'alg_not_allowed'
  | 'bad_type'
  | 'no_tenant'
  | 'revoked_key'
  | 'unknown_key_id';

/** What a verifier found: the caller, or why not, in words for the caller (never a secret, never the token). */
export type Authentication =
  { ok: true; caller: Caller } | { ok: false; reason: InvalidTokenReason; description: string };

export const authenticated = (caller: Caller): Authentication => ({ ok: true, caller });
export const notAuthenticated = (reason: InvalidTokenReason, description: string): Authentication => ({
  ok: false,
  reason,
  description,
});

/** RFC 6750 §3: no error attribute when the request carried no credential. */
const CHALLENGE = 'Bearer';

/** Nothing was sent: 401 and a bare `Bearer` challenge. */
export function missingCredential(): GateRefusal {
  return new GateRefusal(
    ErrorCode.Unauthenticated,
    'authentication required: send Authorization: Bearer <token> or an API key',
    'missing',
    {
      'www-authenticate': CHALLENGE,
    },
  );
}

/**
 * A credential was sent and is not good: 401 `invalid_token` with a short description. Descriptions are written
 * here and in the verifiers, never copied from the request: RFC 6750 allows no `"` or `\` in them.
 */
export function invalidToken(reason: InvalidTokenReason, description: string): GateRefusal {
  return new GateRefusal(ErrorCode.Unauthenticated, description, reason, {
    'www-authenticate': `Bearer error="invalid_token", error_description="${description.replace(/["\\]/g, "'")}"`,
  });
}

/**
 * The same credential header sent twice: 400 `invalid_request` (RFC 6750 §3.1: a request that is malformed),
 * naming the header, before either credential is looked at.
 */
export function duplicateCredential(header: 'authorization' | 'x-api-key'): GateRefusal {
  const description = `send one ${header === 'authorization' ? 'Authorization' : 'x-api-key'} header, not several`;
  return new GateRefusal(
    ErrorCode.InvalidRequest,
    description,
    'duplicate_credential',
    {
      'www-authenticate': `Bearer error="invalid_request", error_description="${description}"`,
    },
    { field: header, reason: 'duplicate_credential' },
  );
}

/** A good credential without the scope the route's action needs: 403 `insufficient_scope` naming it. */
export function insufficientScope(action: Action): GateRefusal {
  return new GateRefusal(
    ErrorCode.Forbidden,
    `the credential does not grant the ${action} scope`,
    'insufficient_scope',
    {
      'www-authenticate': `Bearer error="insufficient_scope", scope="${action}"`,
    },
    { scope: action },
  );
}

/** A runtime-wide admin route, called by an admin of another tenant than the operator's. */
export function notOperator(): GateRefusal {
  return new GateRefusal(ErrorCode.Forbidden, 'this route is for admins of the operator tenant', 'not_operator');
}

import type { JWTPayload } from 'jose';
import { TENANT_NAME } from '@libs/config';
import { Action, ACTIONS } from './caller';
import { Authentication, authenticated, notAuthenticated } from './token-refusals';

/** Which claims name the caller (eventmesh.security.gate.token.*Claim); each a literal claim name, not a path. */
export interface ClaimNames {
  principalClaim: string;
  tenantClaim: string;
  scopesClaim: string;
}

const MAX_PRINCIPAL_CHARS = 256;

/**
 * The caller a verified token names: its principal (a non-empty string), its tenant (a tenant name, else the
 * token is refused: every resource is a tenant's), and its scopes: a space-separated string (OAuth `scope`) or an
 * array of strings; scopes other than publish, subscribe and admin are ignored.
 */
export function callerOfClaims(payload: JWTPayload, names: ClaimNames): Authentication {
  const principal = payload[names.principalClaim];
  if (typeof principal !== 'string' || principal === '' || principal.length > MAX_PRINCIPAL_CHARS) {
    return notAuthenticated('malformed', `the token has no usable ${names.principalClaim} claim`);
  }
  const tenant = payload[names.tenantClaim];
  if (typeof tenant !== 'string' || !TENANT_NAME.test(tenant)) {
    return notAuthenticated(
      'no_tenant',
      `the token has no valid ${names.tenantClaim} claim (1 to 64 characters of [A-Za-z0-9._-])`,
    );
  }
  return authenticated({ principal, tenant, scopes: scopesOf(payload[names.scopesClaim]), via: 'jwt' });
}

/** The known actions among the scopes a claim lists, once each, in the order of ACTIONS. */
export function scopesOf(claim: unknown): Action[] {
  const listed =
    typeof claim === 'string'
      ? claim.split(/\s+/)
      : Array.isArray(claim)
        ? claim.filter((s): s is string => typeof s === 'string')
        : [];
  return ACTIONS.filter((action) => listed.includes(action));
}

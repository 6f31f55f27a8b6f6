import { errors, JWTVerifyGetKey, jwtVerify } from 'jose';
import type { EventMeshConfig } from '@libs/config';
import { ErrorCode, EventMeshError } from '@libs/errors';
import type { Caller } from './caller';
import { KeySetUnavailable } from './jwt-key-source';
import { callerOfClaims } from './token-claims';
import { Authentication, authenticated, notAuthenticated } from './token-refusals';
import { VerifiedTokenCache } from './verified-token-cache';

type TokenConfig = EventMeshConfig['security']['gate']['token'];

/**
 * Bearer JWTs (RFC 7519, with the RFC 8725 practices): the signature with a trusted key (`keys`, from the keys
 * file or the JWKS URL) by an allowed algorithm only (the configured list: asymmetric, never `none`, never HMAC,
 * so a public key can never be used as an HMAC secret); the `typ` header one of `types` (explicit typing);
 * `iss` and `aud` as configured and `exp` required; `nbf` honoured; both with `clockSkewSeconds` of tolerance. A verified token's caller is cached until its `exp`.
 *
 * `verify` answers synchronously from the cache, or with a promise; it throws only when the key set cannot be
 * read (TokenAuth cannot decide: 503 when the gate enforces).
 */
export class JwtVerifier {
  private readonly cache: VerifiedTokenCache<Caller>;

  constructor(
    private readonly config: TokenConfig,
    /** Undefined: no issuer is trusted (API keys only); every JWT is refused. */
    private readonly keys: JWTVerifyGetKey | undefined,
    now: () => number = Date.now,
  ) {
    this.cache = new VerifiedTokenCache(config.cacheMaxEntries, now);
  }

  verify(token: string): Authentication | Promise<Authentication> {
    const cached = this.cache.get(token);
    if (cached) return authenticated(cached);
    return this.verifyAndCache(token);
  }

  private async verifyAndCache(token: string): Promise<Authentication> {
    if (!this.keys) return notAuthenticated('unknown_key', 'this runtime trusts no token issuer; use an API key');
    let payload;
    let protectedHeader;
    try {
      ({ payload, protectedHeader } = await jwtVerify(token, this.keys, {
        algorithms: this.config.algorithms,
        issuer: this.config.issuer,
        audience: this.config.audience,
        clockTolerance: this.config.clockSkewSeconds,
        requiredClaims: ['exp', 'iss', 'aud'],
      }));
    } catch (e) {
      if (e instanceof KeySetUnavailable) {
        throw new EventMeshError(
          ErrorCode.DependencyUnavailable,
          "the token issuer's keys cannot be read; try again",
          { dependency: 'jwks' },
          true,
          { cause: e },
        );
      }
      return refusalOf(e);
    }
    // Explicit typing (RFC 8725 §3.11): a token of another kind signed by the same issuer (an ID token, a logout
    // token) is not an access token, though its signature, iss and aud check out.
    const typ =
      typeof protectedHeader.typ === 'string'
        ? protectedHeader.typ.toLowerCase().replace(/^application\//, '')
        : undefined;
    if (typ === undefined || !this.config.types.includes(typ)) {
      return notAuthenticated(
        'bad_type',
        `the token's typ header is not one this runtime accepts (${this.config.types.join(', ')})`,
      );
    }
    const authentication = callerOfClaims(payload, this.config);
    if (authentication.ok) this.cache.set(token, authentication.caller, (payload.exp as number) * 1000);
    return authentication;
  }
}

/** A verification failure in the gate's words. */
function refusalOf(e: unknown): Authentication {
  if (e instanceof errors.JWTExpired) return notAuthenticated('expired', 'the token has expired');
  if (e instanceof errors.JWTClaimValidationFailed) {
    if (e.reason === 'missing') return notAuthenticated('malformed', `the token has no ${e.claim} claim`);
    if (e.claim === 'iss')
      return notAuthenticated('bad_issuer', 'the token was issued by an issuer this runtime does not trust');
    if (e.claim === 'aud') return notAuthenticated('bad_audience', 'the token is not meant for this runtime (aud)');
    if (e.claim === 'nbf' && e.reason === 'check_failed')
      return notAuthenticated('not_yet_valid', 'the token is not valid yet (nbf)');
    return notAuthenticated('malformed', `the token's ${e.claim} claim is invalid`);
  }
  if (e instanceof errors.JOSEAlgNotAllowed)
    return notAuthenticated('alg_not_allowed', 'the token is signed with an algorithm this runtime does not accept');
  if (e instanceof errors.JWSSignatureVerificationFailed)
    return notAuthenticated('bad_signature', 'the token signature is not valid');
  if (e instanceof errors.JWKSMultipleMatchingKeys)
    return notAuthenticated('unknown_key', 'the token names no key id (kid) and several trusted keys match');
  if (e instanceof errors.JWKSNoMatchingKey)
    return notAuthenticated('unknown_key', 'the token is signed with a key this runtime does not trust');
  return notAuthenticated('malformed', 'the token is not a well-formed signed JWT');
}

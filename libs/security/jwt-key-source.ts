import { createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createLocalJWKSet, createRemoteJWKSet, errors, JSONWebKeySet, JWTVerifyGetKey } from 'jose';
import { ConfigError, EventMeshConfig } from '@libs/config';

type TokenConfig = EventMeshConfig['security']['gate']['token'];

const KEYS_FILE = 'EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE (eventmesh.security.gate.token.keysFile)';

/** The issuer's key set could not be read (its URL unreachable, a bad answer): TokenAuth cannot decide. */
export class KeySetUnavailable extends Error {
  constructor(cause: unknown) {
    super(`the token issuer's key set is unavailable: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'KeySetUnavailable';
  }
}

/**
 * Where token signing keys come from: the keys file (read once, at boot) and/or the JWKS URL (fetched on first
 * use, kept `jwksMaxAgeMs`, fetched again on a kid it does not hold, at most once per `jwksCooldownMs`; after a
 * failed fetch, not again within `jwksCooldownMs`, and the requests that needed it cannot be decided). A token
 * is looked up in the file first, then at the URL. Undefined when neither is configured (API keys only).
 */
export function tokenKeySource(token: TokenConfig): JWTVerifyGetKey | undefined {
  const local = token.keysFile !== '' ? createLocalJWKSet(readKeysFile(token.keysFile)) : undefined;
  const remote =
    token.jwksUrl !== ''
      ? createRemoteJWKSet(new URL(token.jwksUrl), {
          cooldownDuration: token.jwksCooldownMs,
          cacheMaxAge: token.jwksMaxAgeMs,
        })
      : undefined;
  if (!remote) return local;
  // A failed fetch is not tried again for a cooldown either: an issuer that is down is not asked on every request.
  let failed: { at: number; error: KeySetUnavailable } | undefined;
  const fetched: JWTVerifyGetKey = async (header, jws) => {
    if (failed && Date.now() - failed.at < token.jwksCooldownMs) throw failed.error;
    try {
      return await remote(header, jws);
    } catch (e) {
      if (!fetchFailure(e)) throw e;
      failed = { at: Date.now(), error: new KeySetUnavailable(e) };
      throw failed.error;
    }
  };
  if (!local) return fetched;
  return async (header, jws) => {
    try {
      return await local(header, jws);
    } catch (e) {
      if (e instanceof errors.JWKSNoMatchingKey) return fetched(header, jws);
      throw e;
    }
  };
}

/**
 * Whether the remote set failed to be fetched (no answer, not 200, not a JWK Set), rather than answered about the
 * token (no key for its kid, an algorithm no JWK Set key can have): only the first leaves the gate unable to decide.
 */
function fetchFailure(e: unknown): boolean {
  if (!(e instanceof errors.JOSEError)) return true;
  return e instanceof errors.JWKSTimeout || e instanceof errors.JWKSInvalid || e.code === 'ERR_JOSE_GENERIC';
}

/**
 * The keys file: a JWK Set of public signing keys (RSA, EC or OKP), each one importable. Anything else stops
 * the boot naming the setting: a trust store that cannot be read must not leave a gate that trusts nothing
 * silently, and one holding a private or symmetric key is a mistake worth refusing.
 */
export function readKeysFile(path: string): JSONWebKeySet {
  const bad = (why: string): never => {
    throw new ConfigError([
      `${KEYS_FILE} = "${path}" ${why}; legal values: the path of a readable file holding a JWK Set ({"keys": [...]}) of public RSA, EC or OKP keys`,
    ]);
  };
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    bad(`cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let set: unknown;
  try {
    set = JSON.parse(text);
  } catch {
    bad('is not JSON');
  }
  const keys = (set as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0) bad('holds no "keys" array of at least one key');
  (keys as unknown[]).forEach((key, i) => {
    const jwk = key as Record<string, unknown> | null;
    if (typeof jwk !== 'object' || jwk === null) return bad(`key ${i} is not a JWK object`);
    if (!['RSA', 'EC', 'OKP'].includes(String(jwk.kty)))
      return bad(`key ${i} has kty ${JSON.stringify(jwk.kty)}, not RSA, EC or OKP (symmetric keys are never trusted)`);
    if ('d' in jwk) return bad(`key ${i} is a private key; the file must hold public keys only`);
    try {
      createPublicKey({ key: jwk as never, format: 'jwk' });
    } catch (e) {
      bad(`key ${i} is not a usable public key (${(e as Error).message})`);
    }
  });
  return set as JSONWebKeySet;
}

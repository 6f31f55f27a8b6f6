import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';

/** A signing key of a test's own, its public half in a JWKS file (EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE). */
export interface TokenIssuer {
  keysFile: string;
  /** An access token of `principal` in `tenant` with `scope`, for 30 minutes. */
  sign(tenant: string, principal: string, scope: string): Promise<string>;
}

/** An ES256 key pair for `issuer` and `audience`, the public key written as a JWKS under `kid`. */
export async function tokenIssuer(issuer: string, audience: string, kid: string): Promise<TokenIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
  const keysFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'eventmesh-tokens-')), 'jwks.json');
  writeFileSync(keysFile, JSON.stringify({ keys: [jwk] }));
  return {
    keysFile,
    sign: (tenant, principal, scope) =>
      new SignJWT({ tenant, scope })
        .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
        .setIssuer(issuer)
        .setAudience(audience)
        .setSubject(principal)
        .setIssuedAt()
        .setExpirationTime('30m')
        .sign(privateKey),
  };
}

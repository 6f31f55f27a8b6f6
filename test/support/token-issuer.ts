import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { exportJWK, generateKeyPair, JWK, KeyLike, SignJWT } from 'jose';

/**
 * A token issuer for instances behind an enforcing TokenAuth gate: an ES256 key whose public half is in a JWKS file
 * the instances read (`env()`), and access tokens it signs for a tenant and principal.
 */
export class TokenIssuer {
  private constructor(
    private readonly privateKey: KeyLike,
    readonly keysFile: string,
    private readonly issuer: string,
    private readonly audience: string,
  ) {}

  static async create(issuer: string, audience: string): Promise<TokenIssuer> {
    const pair = await generateKeyPair('ES256');
    const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 'k-1', alg: 'ES256', use: 'sig' };
    const keysFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'eventmesh-issuer-')), 'jwks.json');
    writeFileSync(keysFile, JSON.stringify({ keys: [jwk] }));
    return new TokenIssuer(pair.privateKey, keysFile, issuer, audience);
  }

  /** The instance settings that make its gate trust this issuer. */
  env(): Record<string, string> {
    return {
      EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: this.keysFile,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: this.issuer,
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: this.audience,
    };
  }

  sign(tenant: string, principal: string, scope = 'publish subscribe admin', expiresIn = '30m'): Promise<string> {
    return new SignJWT({ tenant, scope })
      .setProtectedHeader({ alg: 'ES256', kid: 'k-1', typ: 'at+jwt' })
      .setIssuer(this.issuer)
      .setAudience(this.audience)
      .setSubject(principal)
      .setIssuedAt()
      .setExpirationTime(expiresIn)
      .sign(this.privateKey);
  }
}

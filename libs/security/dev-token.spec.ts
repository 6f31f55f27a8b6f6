import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@libs/config';
import { devTrustEnv, ensureDevSigningKey, mintDevToken, parseMintArgs } from './dev-token';
import { tokenKeySource } from './jwt-key-source';
import { JwtVerifier } from './jwt-verifier';

describe('dev token minter', () => {
  let dir: string;
  beforeAll(() => (dir = join(mkdtempSync(join(tmpdir(), 'dev-token-')), 'keys')));
  afterAll(() => rmSync(join(dir, '..'), { recursive: true, force: true }));

  it('parses its arguments, with defaults', () => {
    expect(
      parseMintArgs(['--tenant', 'acme', '--scopes', 'subscribe,publish', '--sub', 'alice', '--ttl', '60']),
    ).toEqual({
      tenant: 'acme',
      scopes: ['publish', 'subscribe'],
      sub: 'alice',
      ttlSeconds: 60,
      issuer: 'eventmesh-dev',
      audience: 'eventmesh',
    });
    expect(parseMintArgs(['--tenant', 'acme'])).toMatchObject({
      scopes: ['publish', 'subscribe'],
      sub: 'dev',
      ttlSeconds: 3600,
    });
  });

  it.each([
    [[], /--tenant is required/],
    [['--tenant', 'a b'], /--tenant a b/],
    [['--tenant', 'acme', '--scopes', 'publish,root'], /not root/],
    [['--tenant', 'acme', '--ttl', '0'], /--ttl 0/],
    [['--tenant', 'acme', '--ttl'], /--ttl needs a value/],
    [['--tenant', 'acme', '--color', 'red'], /unknown argument --color/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseMintArgs(argv)).toThrow(message);
  });

  it('makes an ES256 key pair on first use (private key 0600), keeps it after, and mints tokens a runtime trusting the JWK Set admits', async () => {
    const key = await ensureDevSigningKey(dir);
    expect(key.created).toBe(true);
    expect(statSync(join(dir, 'private-key.pem')).mode & 0o777).toBe(0o600);
    const jwks = JSON.parse(readFileSync(key.jwksPath, 'utf8')) as { keys: Record<string, unknown>[] };
    expect(jwks.keys).toEqual([expect.objectContaining({ kty: 'EC', crv: 'P-256', kid: key.kid, alg: 'ES256' })]);
    expect(jwks.keys[0]).not.toHaveProperty('d');
    const again = await ensureDevSigningKey(dir);
    expect({ created: again.created, kid: again.kid }).toEqual({ created: false, kid: key.kid });

    const args = parseMintArgs(['--tenant', 'acme', '--scopes', 'publish', '--sub', 'alice']);
    const env = Object.fromEntries(devTrustEnv(key, args).map((line) => line.split('=', 2) as [string, string]));
    expect(env).toEqual({
      EVENTMESH_SECURITY_GATE_FILTERS: 'token',
      EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: key.jwksPath,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: 'eventmesh-dev',
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: 'eventmesh',
    });
    const token = loadConfig(env).security.gate.token;
    const verifier = new JwtVerifier(token, tokenKeySource(token));
    expect(await verifier.verify(await mintDevToken(again, args))).toEqual({
      ok: true,
      caller: { principal: 'alice', tenant: 'acme', scopes: ['publish'], via: 'jwt' },
    });
    const expired = await mintDevToken(again, { ...args, ttlSeconds: 60 }, Math.floor(Date.now() / 1000) - 3600);
    expect(await verifier.verify(expired)).toMatchObject({ ok: false, reason: 'expired' });
  });
});

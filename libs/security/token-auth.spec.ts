import { createHmac, generateKeyPairSync, KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JWK, SignJWT } from 'jose';
import { waitFor } from '../../test/support/wait-for';
import { loadConfig } from '@libs/config';
import { ErrorCode } from '@libs/errors';
import type { StoredApiKey } from '@libs/storage/api-key-store';
import { ApiKeyLookup, ApiKeyVerifier } from './api-key-verifier';
import { newApiKeyCredential } from './api-key-credential';
import { Action, ANONYMOUS } from './caller';
import type { GateRequest, Verdict } from './gate-filter';
import { tokenKeySource } from './jwt-key-source';
import { JwtVerifier } from './jwt-verifier';
import { TokenAuth } from './token-auth';

const ISSUER = 'https://issuer.test';
const AUDIENCE = 'eventmesh';
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
  jwk: JWK;
}

function rsaKey(kid: string): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    kid,
    privateKey,
    publicKey,
    jwk: { ...(publicKey.export({ format: 'jwk' }) as JWK), kid, alg: 'RS256', use: 'sig' },
  };
}

const GOOD_CLAIMS = { sub: 'alice', tenant: 'acme', scope: 'publish subscribe' };

function sign(
  key: SigningKey,
  claims: Record<string, unknown> = GOOD_CLAIMS,
  over: { iss?: string; aud?: string; exp?: number; nbf?: number; noExp?: boolean; typ?: string | null } = {},
): Promise<string> {
  const typ = over.typ === undefined ? 'at+jwt' : over.typ;
  const jwt = new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, ...(typ === null ? {} : { typ }) })
    .setIssuer(over.iss ?? ISSUER)
    .setAudience(over.aud ?? AUDIENCE)
    .setIssuedAt();
  if (!over.noExp) jwt.setExpirationTime(over.exp ?? now() + 3600);
  if (over.nbf !== undefined) jwt.setNotBefore(over.nbf);
  return jwt.sign(key.privateKey);
}

/** A JWK Set served on loopback, its keys changeable, its fetches counted. */
class JwksServer {
  keys: JWK[] = [];
  status = 200;
  fetches = 0;
  private server?: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((_, res) => {
      this.fetches++;
      res.writeHead(this.status, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys }));
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}/.well-known/jwks.json`;
  }

  close(): Promise<void> {
    const closed = new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    this.server?.closeAllConnections();
    return closed;
  }
}

/** Models ApiKeyStore.find: a key by id, whatever its tenant, revoked ones included. */
class StoredKeys implements ApiKeyLookup {
  readonly rows = new Map<string, StoredApiKey>();
  finds = 0;
  async find(id: string): Promise<StoredApiKey | undefined> {
    this.finds++;
    const row = this.rows.get(id);
    return row && { ...row, scopes: [...row.scopes] };
  }
  add(scopes: string[], tenant = 'acme'): string {
    const c = newApiKeyCredential();
    this.rows.set(c.id, {
      id: c.id,
      tenant,
      principal: `svc-${c.id.slice(0, 4)}`,
      name: 'svc',
      scopes,
      secretHash: c.secretHash,
      createdAt: new Date(),
      revokedAt: null,
      lastUsedAt: null,
    });
    return c.token;
  }
}

const request = (headers: GateRequest['headers'], action: Action = 'publish', operatorOnly = false): GateRequest => ({
  route: 'POST /events/publish',
  action,
  headers,
  remoteAddress: '127.0.0.1',
  requestId: 'r-1',
  ...(operatorOnly ? { operatorOnly: true } : {}),
});

describe('TokenAuth', () => {
  const jwks = new JwksServer();
  const k1 = rsaKey('k1');
  const k2 = rsaKey('k2');
  const stranger = rsaKey('k1');
  const keys = new StoredKeys();
  const used: string[] = [];
  let auth: TokenAuth;

  beforeAll(async () => {
    await jwks.start();
    jwks.keys = [k1.jwk];
    const config = loadConfig({
      EVENTMESH_SECURITY_GATE_FILTERS: 'token',
      EVENTMESH_SECURITY_GATE_TOKEN_JWKS_URL: jwks.url,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: ISSUER,
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: AUDIENCE,
      EVENTMESH_SECURITY_GATE_TOKEN_JWKS_COOLDOWN_MS: '1000',
      EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT: 'ops',
    });
    const token = config.security.gate.token;
    auth = new TokenAuth({
      jwt: new JwtVerifier(token, tokenKeySource(token)),
      apiKeys: new ApiKeyVerifier(
        keys,
        { used: (id) => used.push(id) },
        { cacheMs: token.apiKeyCacheMs, maxEntries: 100 },
      ),
      operatorTenant: config.admin.security.operatorTenant,
    });
  });
  afterAll(() => jwks.close());

  const check = (r: GateRequest): Promise<Verdict> => Promise.resolve(auth.check({ request: r, caller: ANONYMOUS }));
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  type Sent = GateRequest['headers'] | string;
  type Case = [
    name: string,
    headers: () => Promise<Sent> | Sent,
    status: 401 | 403,
    reason: string,
    challenge: string | RegExp,
    extra?: { action?: Action; operatorOnly?: boolean },
  ];
  const refusals: Case[] = [
    ['no credential', () => ({}), 401, 'missing', 'Bearer'],
    [
      'a scheme other than Bearer',
      () => ({ authorization: 'Basic YWxpY2U6c2VjcmV0' }),
      401,
      'malformed',
      /^Bearer error="invalid_token", error_description=".+"$/,
    ],
    ['a bearer that is no JWT', () => bearer('not-a-jwt'), 401, 'malformed', /error="invalid_token"/],
    [
      'an expired token',
      () => sign(k1, GOOD_CLAIMS, { exp: now() - 3600 }),
      401,
      'expired',
      'Bearer error="invalid_token", error_description="the token has expired"',
    ],
    [
      'a token not valid yet (nbf)',
      () => sign(k1, GOOD_CLAIMS, { nbf: now() + 3600 }),
      401,
      'not_yet_valid',
      /error="invalid_token"/,
    ],
    [
      'a token of another issuer',
      () => sign(k1, GOOD_CLAIMS, { iss: 'https://evil.test' }),
      401,
      'bad_issuer',
      /error="invalid_token"/,
    ],
    [
      'a token for another audience',
      () => sign(k1, GOOD_CLAIMS, { aud: 'someone-else' }),
      401,
      'bad_audience',
      /error="invalid_token"/,
    ],
    ['a token without exp', () => sign(k1, GOOD_CLAIMS, { noExp: true }), 401, 'malformed', /no exp claim/],
    [
      'a token signed by another key under a trusted kid',
      () => sign(stranger),
      401,
      'bad_signature',
      /error="invalid_token"/,
    ],
    [
      'alg none',
      () =>
        `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ ...GOOD_CLAIMS, iss: ISSUER, aud: AUDIENCE, exp: now() + 3600 })}.`,
      401,
      'alg_not_allowed',
      /error="invalid_token"/,
    ],
    [
      'HS256 signed with the RSA public key as the HMAC secret',
      () => {
        const signingInput = `${b64({ alg: 'HS256', typ: 'JWT', kid: 'k1' })}.${b64({ ...GOOD_CLAIMS, iss: ISSUER, aud: AUDIENCE, exp: now() + 3600 })}`;
        const secret = k1.publicKey.export({ type: 'spki', format: 'pem' });
        return `${signingInput}.${createHmac('sha256', secret).update(signingInput).digest('base64url')}`;
      },
      401,
      'alg_not_allowed',
      /error="invalid_token"/,
    ],
    [
      'a token without a typ header',
      () => sign(k1, GOOD_CLAIMS, { typ: null }),
      401,
      'bad_type',
      /error="invalid_token", error_description="the token's typ header/,
    ],
    [
      'an ID token-like typ',
      () => sign(k1, GOOD_CLAIMS, { typ: 'id_token+jwt' }),
      401,
      'bad_type',
      /error="invalid_token"/,
    ],
    [
      'a logout token (typ logout+jwt)',
      () => sign(k1, GOOD_CLAIMS, { typ: 'logout+jwt' }),
      401,
      'bad_type',
      /error="invalid_token"/,
    ],
    [
      'a token without a tenant',
      () => sign(k1, { sub: 'alice', scope: 'publish' }),
      401,
      'no_tenant',
      /error="invalid_token"/,
    ],
    [
      'a token with an invalid tenant',
      () => sign(k1, { sub: 'alice', tenant: 'a b', scope: 'publish' }),
      401,
      'no_tenant',
      /error="invalid_token"/,
    ],
    [
      'an unknown API key id',
      () => bearer(newApiKeyCredential().token),
      401,
      'unknown_key_id',
      /error="invalid_token"/,
    ],
    [
      'a known API key id with another secret',
      () => bearer(`emk_${keys.add(['publish']).split('_')[1]}_${'A'.repeat(43)}`),
      401,
      'unknown_key_id',
      /error="invalid_token"/,
    ],
    [
      'a revoked API key',
      () => {
        const token = keys.add(['publish']);
        keys.rows.get(token.split('_')[1])!.revokedAt = new Date();
        return { 'x-api-key': token };
      },
      401,
      'revoked_key',
      'Bearer error="invalid_token", error_description="the API key has been revoked"',
    ],
    [
      'a token without the scope of the action',
      () => sign(k1, { ...GOOD_CLAIMS, scope: 'subscribe' }),
      403,
      'insufficient_scope',
      'Bearer error="insufficient_scope", scope="publish"',
    ],
    [
      'unknown scopes only',
      () => sign(k1, { ...GOOD_CLAIMS, scope: ['publishing', 'root'] }),
      403,
      'insufficient_scope',
      /scope="publish"/,
    ],
    [
      'an API key without the scope of the action',
      () => bearer(keys.add(['publish'])),
      403,
      'insufficient_scope',
      'Bearer error="insufficient_scope", scope="subscribe"',
      { action: 'subscribe' },
    ],
    [
      'an admin of another tenant than the operator on an operator route',
      () => sign(k1, { sub: 'bob', tenant: 'acme', scope: 'admin' }),
      403,
      'not_operator',
      '',
      { action: 'admin', operatorOnly: true },
    ],
  ];

  // A rest parameter: jest reads a callback of more parameters than a row has as one wanting `done`.
  it.each(refusals)('refuses %s', async (...row: Case) => {
    const [, headersOf, status, reason, challenge, extra] = row;
    const made = await headersOf();
    const headers: GateRequest['headers'] = typeof made === 'string' ? bearer(made) : made;
    const verdict = await check(request(headers, extra?.action, extra?.operatorOnly));
    expect(verdict.allow).toBe(false);
    if (verdict.allow) return;
    expect({ status: verdict.refusal.code, reason: verdict.refusal.reason }).toEqual({
      status: status === 401 ? ErrorCode.Unauthenticated : ErrorCode.Forbidden,
      reason,
    });
    if (challenge === '') expect(verdict.refusal.headers['www-authenticate']).toBeUndefined();
    else if (typeof challenge === 'string') expect(verdict.refusal.headers['www-authenticate']).toBe(challenge);
    else expect(verdict.refusal.headers['www-authenticate']).toMatch(challenge);
    // What the caller is told never repeats the credential.
    const sent = String(headers.authorization ?? headers['x-api-key'] ?? '');
    if (sent.length > 20)
      expect(JSON.stringify([verdict.refusal.message, verdict.refusal.headers])).not.toContain(sent.slice(-20));
  });

  it.each(['at+jwt', 'AT+JWT', 'application/at+jwt', 'JWT', 'jwt', 'Application/JWT'])(
    'admits typ %s (RFC 8725: case-insensitive, application/ optional)',
    async (typ) => {
      expect(await check(request(bearer(await sign(k1, GOOD_CLAIMS, { typ }))))).toMatchObject({
        allow: true,
        caller: { principal: 'alice' },
      });
    },
  );

  it('refuses a credential header sent twice with 400 invalid_request naming it, before looking at either', async () => {
    const token = await sign(k1);
    for (const [header, values] of [
      ['authorization', [`Bearer ${token}`, `Bearer ${token}`]],
      ['x-api-key', [keys.add(['publish']), keys.add(['publish'])]],
    ] as const) {
      const verdict = await check(request({ [header]: [...values] }));
      expect(verdict).toMatchObject({
        allow: false,
        refusal: {
          code: ErrorCode.InvalidRequest,
          reason: 'duplicate_credential',
          details: { field: header, reason: 'duplicate_credential' },
        },
      });
      if (!verdict.allow)
        expect(verdict.refusal.headers['www-authenticate']).toMatch(/^Bearer error="invalid_request"/);
    }
  });

  it('accepts only the configured typ values (EVENTMESH_SECURITY_GATE_TOKEN_TYPES)', async () => {
    const config = loadConfig({
      EVENTMESH_SECURITY_GATE_TOKEN_JWKS_URL: jwks.url,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: ISSUER,
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: AUDIENCE,
      EVENTMESH_SECURITY_GATE_TOKEN_TYPES: 'application/at+jwt',
    });
    const token = config.security.gate.token;
    expect(token.types).toEqual(['at+jwt']);
    const strict = new JwtVerifier(token, tokenKeySource(token));
    expect(await strict.verify(await sign(k1, GOOD_CLAIMS, { typ: 'at+JWT' }))).toMatchObject({ ok: true });
    expect(await strict.verify(await sign(k1, GOOD_CLAIMS, { typ: 'JWT' }))).toMatchObject({
      ok: false,
      reason: 'bad_type',
    });
  });

  it('admits a good token as its caller, and a repeated one from the cache without a promise', async () => {
    const token = await sign(k1);
    const first = await check(request(bearer(token)));
    expect(first).toEqual({
      allow: true,
      caller: { principal: 'alice', tenant: 'acme', scopes: ['publish', 'subscribe'], via: 'jwt' },
    });
    const again = auth.check({ request: request(bearer(token)), caller: ANONYMOUS });
    expect(again).not.toBeInstanceOf(Promise);
    expect(again).toEqual(first);
  });

  it('admits an API key (Bearer or x-api-key) as its tenant and principal, and notes its use', async () => {
    const token = keys.add(['publish', 'subscribe'], 'beta');
    const id = token.split('_')[1];
    for (const headers of [bearer(token), { 'x-api-key': token }]) {
      const verdict = await check(request(headers, 'subscribe'));
      expect(verdict).toEqual({
        allow: true,
        caller: {
          principal: keys.rows.get(id)!.principal,
          tenant: 'beta',
          scopes: ['publish', 'subscribe'],
          via: 'api-key',
        },
      });
    }
    expect(used).toContain(id);
  });

  it('admits an operator-tenant admin on an operator route', async () => {
    const verdict = await check(
      request(bearer(await sign(k1, { sub: 'root', tenant: 'ops', scope: 'admin' })), 'admin', true),
    );
    expect(verdict).toMatchObject({ allow: true, caller: { tenant: 'ops', scopes: ['admin'] } });
  });

  it('refuses an unknown kid, refetching at most once per cooldown, and admits it once the issuer rotates', async () => {
    expect((await check(request(bearer(await sign(k1))))).allow).toBe(true);
    const rotated = await sign(k2);
    jwks.keys = [k1.jwk];
    // An unknown kid makes the set be fetched again (once the cooldown since the last fetch is over)...
    const before = jwks.fetches;
    await waitFor(
      'a refetch on the unknown kid',
      async () => {
        expect(await check(request(bearer(rotated)))).toMatchObject({
          allow: false,
          refusal: { reason: 'unknown_key' },
        });
        return jwks.fetches > before;
      },
      { timeoutMs: 5000, intervalMs: 50 },
    );
    const fetched = jwks.fetches;
    expect(fetched).toBe(before + 1);
    // ...and, just fetched, the same kid again is refused without a fetch: the refetch is rate-limited.
    for (let i = 0; i < 5; i++)
      expect(await check(request(bearer(rotated)))).toMatchObject({ allow: false, refusal: { reason: 'unknown_key' } });
    expect(jwks.fetches).toBe(fetched);
    // The issuer rotates: k2 joins the set. After the cooldown (1 s), one refetch, and the token is admitted.
    jwks.keys = [k1.jwk, k2.jwk];
    const admitted = await waitFor(
      'the rotated key to be fetched',
      async () => (await check(request(bearer(rotated)))).allow,
      { timeoutMs: 5000, intervalMs: 50 },
    );
    expect(admitted).toBe(true);
    expect(jwks.fetches).toBe(fetched + 1);
  });

  it('cannot decide when the JWKS URL fails (DEPENDENCY_UNAVAILABLE, not a refusal), and asks it again only after the cooldown', async () => {
    const failing = new JwksServer();
    failing.status = 500;
    await failing.start();
    try {
      const config = loadConfig({
        EVENTMESH_SECURITY_GATE_TOKEN_JWKS_URL: failing.url,
        EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: ISSUER,
        EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: AUDIENCE,
        EVENTMESH_SECURITY_GATE_TOKEN_JWKS_COOLDOWN_MS: '1000',
      });
      const token = config.security.gate.token;
      const lonely = new TokenAuth({
        jwt: new JwtVerifier(token, tokenKeySource(token)),
        apiKeys: new ApiKeyVerifier(keys, { used: () => undefined }, { cacheMs: 0, maxEntries: 1 }),
        operatorTenant: 'default',
      });
      const good = request(bearer(await sign(k1)));
      for (let i = 0; i < 5; i++) {
        await expect(Promise.resolve(lonely.check({ request: good, caller: ANONYMOUS }))).rejects.toMatchObject({
          code: ErrorCode.DependencyUnavailable,
        });
      }
      expect(failing.fetches).toBe(1);
      // The issuer is back: after the cooldown the set is fetched again and the token admitted.
      failing.status = 200;
      failing.keys = [k1.jwk];
      await waitFor(
        'the recovered JWKS to be fetched',
        async () => (await lonely.check({ request: good, caller: ANONYMOUS })).allow,
        { timeoutMs: 5000, intervalMs: 50 },
      );
      expect(failing.fetches).toBe(2);
    } finally {
      await failing.close();
    }
  });
});

describe('TokenAuth with a keys file', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'token-keys-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const configWith = (file: string) =>
    loadConfig({
      EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE: file,
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: ISSUER,
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: AUDIENCE,
    }).security.gate.token;

  it('verifies tokens signed by a key of the file', async () => {
    const key = rsaKey('file-1');
    const file = join(dir, 'good.json');
    writeFileSync(file, JSON.stringify({ keys: [key.jwk] }));
    const token = configWith(file);
    const verifier = new JwtVerifier(token, tokenKeySource(token));
    expect(await verifier.verify(await sign(key))).toMatchObject({
      ok: true,
      caller: { principal: 'alice', tenant: 'acme' },
    });
    expect(await verifier.verify(await sign(rsaKey('other')))).toMatchObject({ ok: false, reason: 'unknown_key' });
  });

  it.each([
    ['a missing file', 'missing.json', undefined, /cannot be read \(ENOENT\)/],
    ['a file that is not JSON', 'text.json', 'keys: none', /is not JSON/],
    ['an empty key set', 'empty.json', JSON.stringify({ keys: [] }), /holds no "keys" array/],
    ['a symmetric key', 'oct.json', JSON.stringify({ keys: [{ kty: 'oct', k: 'c2VjcmV0' }] }), /key 0 has kty "oct"/],
    [
      'a private key',
      'private.json',
      JSON.stringify({
        keys: [generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' })],
      }),
      /key 0 is a private key/,
    ],
    [
      'a broken key',
      'broken.json',
      JSON.stringify({ keys: [{ kty: 'RSA', n: 'AQAB' }] }),
      /key 0 is not a usable public key/,
    ],
  ])('stops the boot on %s, naming the setting', (_name, file, content, why) => {
    const path = join(dir, file);
    if (content !== undefined) writeFileSync(path, content);
    const token = configWith(path);
    expect(() => tokenKeySource(token)).toThrow(
      /EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE \(eventmesh\.security\.gate\.token\.keysFile\)/,
    );
    expect(() => tokenKeySource(token)).toThrow(why);
  });
});

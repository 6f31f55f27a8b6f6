import { createHmac, generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, importPKCS8, JWK, KeyLike, SignJWT } from 'jose';
import { startInstance, RunningInstance } from '../../apps/instance/src/instance';
import { newApiKeyCredential } from '@libs/security';
import { ApiKeyStore } from '@libs/storage';
import { testConfig, uniqueTopic } from '../support/env';
import { waitFor } from '../support/wait-for';

const ISSUER = 'https://issuer.token-gate.test';
const AUDIENCE = 'eventmesh-token-gate';

/** An RSA key with its private half for signing and its public JWK for the JWKS. */
async function rsaKey(kid: string): Promise<{ kid: string; privateKey: KeyLike; publicPem: string; jwk: JWK }> {
  const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privateKey = await importPKCS8(pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), 'RS256');
  return {
    kid,
    privateKey,
    publicPem: pair.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    jwk: { ...(await exportJWK(pair.publicKey)), kid, alg: 'RS256', use: 'sig' },
  };
}

const b64url = (value: string | Buffer) => Buffer.from(value).toString('base64url');

/**
 * TokenAuth on a real gateway (fail-closed), its keys fetched from a JWKS the test serves on 127.0.0.1: the cases
 * of a token that must not pass, each answered 401 with `WWW-Authenticate` and nothing written, a good token and
 * an API key that pass, a revoked key refused, and a key rotation the gateway learns by refetching the JWKS for an
 * unknown `kid`.
 */
describe('TokenAuth on a real gateway, keys from a JWKS on loopback', () => {
  const topic = uniqueTopic('token-gate');
  let jwks: Server;
  let jwksFetches = 0;
  let served: JWK[] = [];
  let instance: RunningInstance;
  let first: Awaited<ReturnType<typeof rsaKey>>;
  let second: Awaited<ReturnType<typeof rsaKey>>;

  beforeAll(async () => {
    first = await rsaKey('k1');
    second = await rsaKey('k2');
    served = [first.jwk];
    jwks = createServer((_, response) => {
      jwksFetches++;
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: served }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const config = testConfig({
      EVENTMESH_INSTANCE_ID: `token-gate-${randomUUID().slice(0, 8)}`,
      EVENTMESH_KAFKA_TOPICS: topic,
      EVENTMESH_KAFKA_TOPIC_PARTITIONS: '1',
      EVENTMESH_HTTP_PORT: '0',
      EVENTMESH_SECURITY_GATE_FILTERS: 'token',
      EVENTMESH_SECURITY_GATE_FAIL_CLOSED: 'true',
      // An enforcing ingress gate boots only behind a gated admin API.
      EVENTMESH_ADMIN_SECURITY_FILTERS: 'token',
      EVENTMESH_ADMIN_SECURITY_FAIL_CLOSED: 'true',
      EVENTMESH_SECURITY_GATE_TOKEN_JWKS_URL: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`,
      EVENTMESH_SECURITY_GATE_TOKEN_JWKS_COOLDOWN_MS: '1000',
      EVENTMESH_SECURITY_GATE_TOKEN_ISSUER: ISSUER,
      EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE: AUDIENCE,
      EVENTMESH_SECURITY_GATE_TOKEN_API_KEY_CACHE_MS: '1000',
    });
    instance = await startInstance(config, { roles: ['gateway'] });
  });
  afterAll(async () => {
    await instance?.close();
    await new Promise((resolve) => jwks?.close(resolve));
  });

  const now = () => Math.floor(Date.now() / 1000);
  const sign = (
    key: Awaited<ReturnType<typeof rsaKey>>,
    claims: Record<string, unknown> = {},
    exp: number = now() + 600,
    typ = 'at+jwt',
  ) =>
    new SignJWT({ tenant: 'acme', scope: 'publish', ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ })
      .setIssuer(String(claims.iss ?? ISSUER))
      .setAudience(String(claims.aud ?? AUDIENCE))
      .setSubject('alice')
      .setExpirationTime(exp)
      .sign(key.privateKey);
  /** A token whose header names `alg` and whose signature is made by `signature`. */
  const forged = (alg: string, signature: (input: string) => string) => {
    const input = `${b64url(JSON.stringify({ alg, kid: 'k1', typ: 'JWT' }))}.${b64url(JSON.stringify({ iss: ISSUER, aud: AUDIENCE, sub: 'mallory', tenant: 'acme', scope: 'publish', exp: now() + 600 }))}`;
    return `${input}.${signature(input)}`;
  };

  const publish = (authorization?: string) =>
    fetch(`${instance.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json', ...(authorization ? { authorization } : {}) },
      body: JSON.stringify({ specversion: '1.0', id: randomUUID(), source: '/token-gate', type: 'token.checked' }),
    });
  const endOffset = async () => Number((await instance.deps.topics.endOffsets(topic)).get(0));

  it.each<[string, () => Promise<string | undefined>, RegExp]>([
    ['no token', async () => undefined, /^Bearer$/],
    ['a malformed token', async () => 'Bearer not-a-jwt', /invalid_token/],
    ['an expired token', () => sign(first, {}, now() - 3600).then((t) => `Bearer ${t}`), /invalid_token/],
    ['a token not yet valid', () => sign(first, { nbf: now() + 3600 }).then((t) => `Bearer ${t}`), /invalid_token/],
    [
      'a token of another issuer',
      () => sign(first, { iss: 'https://elsewhere.test' }).then((t) => `Bearer ${t}`),
      /invalid_token/,
    ],
    [
      'a token for another audience',
      () => sign(first, { aud: 'another-service' }).then((t) => `Bearer ${t}`),
      /invalid_token/,
    ],
    ['alg none', async () => `Bearer ${forged('none', () => '')}`, /invalid_token/],
    [
      'HS256 signed with the RSA public key as its secret',
      async () =>
        `Bearer ${forged('HS256', (input) => createHmac('sha256', first.publicPem).update(input).digest('base64url'))}`,
      /invalid_token/,
    ],
    [
      'a token signed by a key the JWKS does not hold',
      () => sign({ ...second, kid: 'k1' }).then((t) => `Bearer ${t}`),
      /invalid_token/,
    ],
    ['an unknown API key', async () => `Bearer ${newApiKeyCredential().token}`, /invalid_token/],
    [
      'a token of another type (typ logout+jwt)',
      () => sign(first, {}, now() + 600, 'logout+jwt').then((t) => `Bearer ${t}`),
      /invalid_token/,
    ],
  ])('refuses %s with 401 and WWW-Authenticate, writing nothing', async (_, authorization, challenge) => {
    const before = await endOffset();
    const response = await publish(await authorization());
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(challenge);
    expect(await response.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(await endOffset()).toBe(before);
  });

  it('refuses a request with two Authorization headers 400 INVALID_REQUEST, writing nothing, though each is a good token', async () => {
    const token = `Bearer ${await sign(first)}`;
    const before = await endOffset();
    // fetch joins repeated headers into one; node:http sends them as given.
    const answer = await new Promise<{ status: number; challenge: string | undefined; body: string }>(
      (resolve, reject) => {
        const url = new URL(`${instance.url}/events/publish?topic=${topic}`);
        // Headers given as a list are sent as they are: Host and the body's length too.
        const body = JSON.stringify({
          specversion: '1.0',
          id: randomUUID(),
          source: '/token-gate',
          type: 'token.checked',
        });
        const headers = [
          'host',
          url.host,
          'content-type',
          'application/cloudevents+json',
          'content-length',
          String(Buffer.byteLength(body)),
          'authorization',
          token,
          'Authorization',
          token,
        ];
        const sent = httpRequest(url, { method: 'POST', headers }, (response) => {
          let body = '';
          response.setEncoding('utf8').on('data', (c: string) => (body += c));
          response.on('end', () =>
            resolve({ status: response.statusCode!, challenge: response.headers['www-authenticate'], body }),
          );
        });
        sent.on('error', reject);
        sent.end(body);
      },
    );
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({
      code: 'INVALID_REQUEST',
      field: 'authorization',
      reason: 'duplicate_credential',
    });
    expect(answer.challenge).toMatch(/^Bearer error="invalid_request"/);
    expect(await endOffset()).toBe(before);
    // Routes behind Fastify see the same gate.
    const listing = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${instance.url}/subscriptions`);
      const sent = httpRequest(
        url,
        { headers: ['host', url.host, 'authorization', token, 'authorization', 'Bearer other'] },
        (response) => {
          response.resume();
          resolve(response.statusCode!);
        },
      );
      sent.on('error', reject);
      sent.end();
    });
    expect(listing).toBe(400);
  });

  it('accepts a good token, and refuses it 403 insufficient_scope where its scopes do not reach', async () => {
    const before = await endOffset();
    const token = `Bearer ${await sign(first)}`;
    expect((await publish(token)).status).toBe(202);
    expect(await endOffset()).toBe(before + 1);
    const listing = await fetch(`${instance.url}/subscriptions`, { headers: { authorization: token } });
    expect(listing.status).toBe(403);
    expect(listing.headers.get('www-authenticate')).toMatch(/insufficient_scope/);
  });

  it('learns a rotated key by refetching the JWKS for its unknown kid', async () => {
    const rotated = `Bearer ${await sign(second)}`;
    const fetchesBefore = jwksFetches;
    // Not served yet: refused (and the refetch it causes finds nothing new).
    expect((await publish(rotated)).status).toBe(401);
    served = [first.jwk, second.jwk];
    // Within a cooldown (1 s here) is the promise: 10 s leaves 9 s for a loaded host, and a kid not refetched would wait out the 10 min max age.
    const accepted = await waitFor(
      'the rotated key to be accepted (one refetch per cooldown)',
      async () => ((await publish(rotated)).status === 202 ? true : undefined),
      {
        timeoutMs: 10000,
        intervalMs: 250,
      },
    );
    expect(accepted).toBe(true);
    expect(jwksFetches).toBeGreaterThan(fetchesBefore);
  });

  it('accepts an API key until it is revoked, then refuses it 401 on every request', async () => {
    const store = new ApiKeyStore(instance.deps.db);
    const credential = newApiKeyCredential();
    await store.create({
      id: credential.id,
      tenant: 'acme',
      principal: 'billing',
      name: 'billing',
      scopes: ['publish'],
      secretHash: credential.secretHash,
    });
    expect((await publish(`Bearer ${credential.token}`)).status).toBe(202);
    await store.revoke(credential.id, 'acme');
    // Within the API key cache (1 s here) is the promise: 5 s leaves 4 s for a loaded host's requests.
    const refused = await waitFor(
      'the revoked key to be refused',
      async () => {
        const response = await publish(`Bearer ${credential.token}`);
        return response.status === 401 ? response : undefined;
      },
      { timeoutMs: 5000 },
    );
    expect(refused.headers.get('www-authenticate')).toMatch(/invalid_token/);
  });
});

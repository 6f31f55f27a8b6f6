import { createPrivateKey, generateKeyPairSync, KeyObject, randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { calculateJwkThumbprint, JWK, SignJWT } from 'jose';
import { TENANT_NAME } from '@libs/config';
import { Action, ACTIONS } from './caller';

/**
 * The dev token minter's core (`npm run token:mint`, scripts/mint-token.ts): a local ES256 key pair the runtime
 * is told to trust (its public half as a JWK Set file), and tokens signed with it carrying the claims the gate
 * reads by default (sub, tenant, scope). For trying the gate on a laptop; production tokens come from an issuer.
 */
export const DEV_TOKEN_ISSUER = 'eventmesh-dev';
export const DEV_TOKEN_AUDIENCE = 'eventmesh';
const ALG = 'ES256';
const PRIVATE_KEY_FILE = 'private-key.pem';
const JWKS_FILE = 'jwks.json';

export interface MintArgs {
  tenant: string;
  scopes: Action[];
  sub: string;
  ttlSeconds: number;
  issuer: string;
  audience: string;
  /** Where the key pair lives, when not the default (.data/dev-token/ of the checkout). */
  dir?: string;
}

export const MINT_USAGE =
  'usage: npm run --silent token:mint -- --tenant <tenant> [--scopes publish,subscribe,admin] [--sub <principal>] [--ttl <seconds>] [--issuer <iss>] [--audience <aud>] [--dir <key directory>]';

/** The minter's arguments; throws an Error naming the bad one (and the usage) otherwise. */
export function parseMintArgs(argv: string[]): MintArgs {
  const values = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (!['--tenant', '--scopes', '--sub', '--ttl', '--issuer', '--audience', '--dir'].includes(flag))
      throw new Error(`unknown argument ${flag}\n${MINT_USAGE}`);
    const value = argv[++i];
    if (value === undefined || value.startsWith('--')) throw new Error(`${flag} needs a value\n${MINT_USAGE}`);
    values.set(flag, value);
  }
  const tenant = values.get('--tenant');
  if (tenant === undefined) throw new Error(`--tenant is required\n${MINT_USAGE}`);
  if (!TENANT_NAME.test(tenant)) throw new Error(`--tenant ${tenant}: 1 to 64 characters of [A-Za-z0-9._-]`);
  const scopes = (values.get('--scopes') ?? 'publish,subscribe')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const unknown = scopes.filter((s) => !(ACTIONS as readonly string[]).includes(s));
  if (scopes.length === 0 || unknown.length > 0)
    throw new Error(
      `--scopes: a comma-separated list of ${ACTIONS.join(', ')}${unknown.length ? ` (not ${unknown.join(', ')})` : ''}`,
    );
  const ttl = values.get('--ttl') ?? '3600';
  if (!/^\d+$/.test(ttl) || Number(ttl) < 1 || Number(ttl) > 7 * 86400)
    throw new Error(`--ttl ${ttl}: seconds, from 1 to ${7 * 86400}`);
  const sub = values.get('--sub') ?? 'dev';
  if (sub === '' || sub.length > 256) throw new Error('--sub: 1 to 256 characters');
  return {
    tenant,
    scopes: ACTIONS.filter((a) => scopes.includes(a)),
    sub,
    ttlSeconds: Number(ttl),
    issuer: values.get('--issuer') ?? DEV_TOKEN_ISSUER,
    audience: values.get('--audience') ?? DEV_TOKEN_AUDIENCE,
    ...(values.has('--dir') ? { dir: values.get('--dir') } : {}),
  };
}

export interface DevSigningKey {
  privateKey: KeyObject;
  kid: string;
  /** The absolute path of the public JWK Set (EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE). */
  jwksPath: string;
  /** Whether this call made the key pair. */
  created: boolean;
}

/**
 * The dev key pair under `dir`: made on first use (private key PEM readable by its owner only, 0600; the public
 * key as a JWK Set), read after. A JWK Set file lost beside a kept private key is written again.
 */
export async function ensureDevSigningKey(dir: string): Promise<DevSigningKey> {
  const root = resolve(dir);
  const privatePath = join(root, PRIVATE_KEY_FILE);
  const jwksPath = join(root, JWKS_FILE);
  let privateKey: KeyObject;
  const created = !existsSync(privatePath);
  if (created) {
    mkdirSync(root, { recursive: true, mode: 0o700 });
    privateKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    writeFileSync(privatePath, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
    chmodSync(privatePath, 0o600);
  } else {
    privateKey = createPrivateKey(readFileSync(privatePath));
  }
  const { d, ...publicJwk } = privateKey.export({ format: 'jwk' }) as JWK;
  void d;
  const kid = await calculateJwkThumbprint(publicJwk);
  if (created || !existsSync(jwksPath)) {
    writeFileSync(jwksPath, `${JSON.stringify({ keys: [{ ...publicJwk, kid, alg: ALG, use: 'sig' }] }, null, 2)}\n`, {
      mode: 0o644,
    });
  }
  return { privateKey, kid, jwksPath, created };
}

/** A token signed with the dev key: sub, tenant, scope (space-separated), iss, aud, iat, exp, jti. */
export function mintDevToken(
  key: DevSigningKey,
  args: MintArgs,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<string> {
  return new SignJWT({ tenant: args.tenant, scope: args.scopes.join(' ') })
    .setProtectedHeader({ alg: ALG, kid: key.kid, typ: 'JWT' })
    .setSubject(args.sub)
    .setIssuer(args.issuer)
    .setAudience(args.audience)
    .setIssuedAt(nowSeconds)
    .setExpirationTime(nowSeconds + args.ttlSeconds)
    .setJti(randomUUID())
    .sign(key.privateKey);
}

/** The settings a runtime needs to trust the dev tokens (EVENTMESH_* lines). */
export function devTrustEnv(key: DevSigningKey, args: Pick<MintArgs, 'issuer' | 'audience'>): string[] {
  return [
    'EVENTMESH_SECURITY_GATE_FILTERS=token',
    `EVENTMESH_SECURITY_GATE_TOKEN_KEYS_FILE=${key.jwksPath}`,
    `EVENTMESH_SECURITY_GATE_TOKEN_ISSUER=${args.issuer}`,
    `EVENTMESH_SECURITY_GATE_TOKEN_AUDIENCE=${args.audience}`,
  ];
}

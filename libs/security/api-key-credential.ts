import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * An API key as a service sends it: `emk_<id>_<secret>`, in `Authorization: Bearer ...` or `x-api-key`. The id
 * (12 random bytes, hex) is public and names the stored key; the secret (32 random bytes, base64url) is shown once
 * at creation and stored only as its SHA-256.
 *
 * Why a fast hash is right here: a slow password hash (bcrypt, scrypt, argon2) exists to make guessing a
 * low-entropy secret expensive. This secret is 256 random bits: no dictionary, and 2^255 guesses on average
 * whatever the hash costs, so a slow hash would add nothing but latency to every request it authenticates.
 * SHA-256 keeps a stolen table useless (preimage resistance) and costs about a microsecond on the publish path.
 */
export const API_KEY_PREFIX = 'emk_';

const ID_BYTES = 12;
const SECRET_BYTES = 32;
const ID = /^[0-9a-f]{24}$/;
const SECRET = /^[A-Za-z0-9_-]{43}$/;

export interface ApiKeyCredential {
  id: string;
  secret: string;
}

/** A key just made: the whole credential (shown once) and what is stored of it. */
export interface NewApiKeyCredential extends ApiKeyCredential {
  /** `emk_<id>_<secret>`: what the service sends. */
  token: string;
  secretHash: Buffer;
}

export function looksLikeApiKey(value: string): boolean {
  return value.startsWith(API_KEY_PREFIX);
}

/** The id and secret of a well-formed API key; undefined for anything else. */
export function parseApiKey(value: string): ApiKeyCredential | undefined {
  if (!looksLikeApiKey(value)) return undefined;
  const rest = value.slice(API_KEY_PREFIX.length);
  const cut = rest.indexOf('_');
  if (cut < 0) return undefined;
  const id = rest.slice(0, cut);
  const secret = rest.slice(cut + 1);
  return ID.test(id) && SECRET.test(secret) ? { id, secret } : undefined;
}

export function isApiKeyId(value: string): boolean {
  return ID.test(value);
}

export function newApiKeyCredential(): NewApiKeyCredential {
  const id = randomBytes(ID_BYTES).toString('hex');
  const secret = randomBytes(SECRET_BYTES).toString('base64url');
  return { id, secret, token: `${API_KEY_PREFIX}${id}_${secret}`, secretHash: hashApiKeySecret(secret) };
}

export function hashApiKeySecret(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

/** Whether the secret is the one the hash was made of, in time independent of where they differ. */
export function apiKeySecretMatches(secret: string, secretHash: Buffer): boolean {
  const presented = hashApiKeySecret(secret);
  return presented.length === secretHash.length && timingSafeEqual(presented, secretHash);
}

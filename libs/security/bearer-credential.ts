import { ApiKeyCredential, looksLikeApiKey, parseApiKey } from './api-key-credential';

/** What a request presents to TokenAuth: nothing, something unusable, a JWT, or an API key. */
export type BearerCredential =
  | { kind: 'none' }
  | { kind: 'malformed'; description: string }
  | { kind: 'jwt'; token: string }
  | { kind: 'api-key'; key: ApiKeyCredential };

/** Longer than any token an issuer sends; refused before any parsing. */
export const MAX_TOKEN_CHARS = 8192;

const NONE: BearerCredential = Object.freeze({ kind: 'none' as const });
const BEARER = /^Bearer +([^\s]+) *$/i;

const malformed = (description: string): BearerCredential => ({ kind: 'malformed', description });

/**
 * The credential of a request: `Authorization: Bearer <JWT or API key>`, or `x-api-key: <API key>`; one of them,
 * once. An API key is recognised by its `emk_` prefix; anything else after `Bearer` is taken for a JWT.
 */
export function credentialOf(headers: Record<string, string | string[] | undefined>): BearerCredential {
  const authorization = headers.authorization;
  const apiKey = headers['x-api-key'];
  if (authorization === undefined && apiKey === undefined) return NONE;
  if (authorization !== undefined && apiKey !== undefined) return malformed('send either Authorization or x-api-key, not both');
  if (Array.isArray(authorization) || Array.isArray(apiKey)) return malformed('send one credential');
  if (apiKey !== undefined) {
    const key = apiKey.length <= MAX_TOKEN_CHARS ? parseApiKey(apiKey.trim()) : undefined;
    return key ? { kind: 'api-key', key } : malformed('x-api-key is not an API key (emk_<id>_<secret>)');
  }
  if (authorization!.length > MAX_TOKEN_CHARS) return malformed('the Authorization header is too long');
  const bearer = BEARER.exec(authorization!);
  if (!bearer) return malformed('expected Authorization: Bearer <token>');
  const token = bearer[1];
  if (looksLikeApiKey(token)) {
    const key = parseApiKey(token);
    return key ? { kind: 'api-key', key } : malformed('the API key is not of the form emk_<id>_<secret>');
  }
  return { kind: 'jwt', token };
}

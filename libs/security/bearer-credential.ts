import { ApiKeyCredential, looksLikeApiKey, parseApiKey } from './api-key-credential';

/** What a request presents to TokenAuth: nothing, something unusable, a JWT, or an API key. */
export type BearerCredential =
  | { kind: 'none' }
  | { kind: 'malformed'; description: string }
  /** The same credential header sent more than once: which would be used is a guess no one should make. */
  | { kind: 'duplicate'; header: 'authorization' | 'x-api-key' }
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
  if (Array.isArray(authorization)) return { kind: 'duplicate', header: 'authorization' };
  if (Array.isArray(apiKey)) return { kind: 'duplicate', header: 'x-api-key' };
  if (authorization !== undefined && apiKey !== undefined)
    return malformed('send either Authorization or x-api-key, not both');
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

const CREDENTIAL_HEADERS = ['authorization', 'x-api-key'] as const;

/**
 * A request's headers as TokenAuth must see them: a credential header sent more than once as the array of its
 * values. Node keeps only the first of duplicate `Authorization` headers (and joins duplicate `x-api-key` ones with
 * ", "), so without this a second credential would go unseen, and a proxy that reads the last one would
 * authenticate someone else than the gate did. Most requests have no duplicate, and keep their headers object.
 */
export function gateHeadersOf(message: {
  headers: Record<string, string | string[] | undefined>;
  rawHeaders: string[];
}): Record<string, string | string[] | undefined> {
  let headers = message.headers;
  for (const name of CREDENTIAL_HEADERS) {
    const values: string[] = [];
    for (let i = 0; i < message.rawHeaders.length; i += 2)
      if (message.rawHeaders[i].toLowerCase() === name) values.push(message.rawHeaders[i + 1]);
    if (values.length > 1) headers = { ...headers, [name]: values };
  }
  return headers;
}

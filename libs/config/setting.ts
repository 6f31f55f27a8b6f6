/**
 * How one setting is read: where from, what it is called, its documentation, and the readers that turn its raw
 * text into a value or refuse it naming what is legal (`invalid`). The settings themselves, and the configuration
 * they make, are config.ts's.
 */

export type Env = Record<string, string | undefined>;

/** One setting: where it is read from, what it is called, and how its raw text becomes a value. */
export interface Setting<T> {
  env: string;
  key: string;
  parse: (raw: string) => T;
  fallback: () => T;
  doc: string;
  /** How docs show the default, when it depends on the machine. */
  shownDefault?: string;
}

export interface SettingDoc {
  env: string;
  key: string;
  default: string;
  doc: string;
}

export const invalid = (legal: string) => {
  throw new SettingValueError(legal);
};

export class SettingValueError extends Error {
  constructor(readonly legal: string) {
    super(legal);
  }
}

export function integer(min: number, max: number) {
  return (raw: string): number => {
    const n = Number(raw);
    if (!/^-?\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > max) {
      return invalid(`an integer from ${min} to ${max}`);
    }
    return n;
  };
}

/** A decimal number from `min` to `max` inclusive (a ratio, a fraction). */
export function decimal(min: number, max: number) {
  return (raw: string): number => {
    const n = Number(raw);
    if (!/^\d+(\.\d+)?$/.test(raw) || !Number.isFinite(n) || n < min || n > max)
      return invalid(`a decimal number from ${min} to ${max}`);
    return n;
  };
}

export function oneOf<T extends string>(values: readonly T[]) {
  return (raw: string): T =>
    (values as readonly string[]).includes(raw) ? (raw as T) : invalid(`one of ${values.join(', ')}`);
}

export function listOf<T extends string>(item: (raw: string) => T, what: string) {
  return (raw: string): T[] => {
    const items = raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
    if (items.length === 0) return invalid(`a comma-separated list of ${what}`);
    return items.map(item);
  };
}

export const text = (raw: string): string => raw;

export const bool = (raw: string): boolean =>
  raw === 'true' ? true : raw === 'false' ? false : invalid('true or false');

/**
 * A JWT `typ` (a media type's subtype, RFC 6838 restricted-name characters), lowercased and without `application/`:
 * how RFC 8725 §3.11 says to compare it.
 */
export const tokenType = (raw: string): string => {
  const bare = raw.toLowerCase().replace(/^application\//, '');
  return /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/.test(bare)
    ? bare
    : invalid(
        'a comma-separated list of JWT types (typ) such as at+jwt or JWT, each 1 to 64 characters of [A-Za-z0-9!#$&^_.+-]',
      );
};

export const claimName = (raw: string): string =>
  /^[A-Za-z0-9_:./-]{1,128}$/.test(raw) ? raw : invalid('a claim name of [A-Za-z0-9_:./-]');

/** What a tenant name may be: in configuration, in a token's tenant claim, in an API key. */
export const TENANT_NAME = /^[A-Za-z0-9._-]{1,64}$/;

export const tenantName = (raw: string): string =>
  TENANT_NAME.test(raw) ? raw : invalid('1 to 64 characters of [A-Za-z0-9._-]');

/** `id:base64` entries, each key 32 bytes (AES-256). */
export const secretKeys = (raw: string): { id: string; key: Buffer }[] => {
  const keys = raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      const at = entry.indexOf(':');
      const id = entry.slice(0, at);
      const key = Buffer.from(entry.slice(at + 1), 'base64');
      if (at < 1 || !/^[A-Za-z0-9._-]{1,32}$/.test(id) || key.length !== 32) {
        return invalid(
          'a comma-separated list of id:key, id 1 to 32 characters of [A-Za-z0-9._-], key 32 bytes in base64 (openssl rand -base64 32)',
        );
      }
      return { id, key };
    });
  if (keys.length === 0 || new Set(keys.map((k) => k.id)).size !== keys.length) {
    return invalid('a comma-separated list of id:key with distinct ids');
  }
  return keys;
};

/** An optional Standard Webhooks secret: `whsec_` and 24 to 64 bytes in base64; empty means unset. */
export const optionalWebhookSecret = (raw: string): string => {
  const match = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(raw);
  const bytes = match ? Buffer.from(match[1], 'base64').length : 0;
  return bytes >= 24 && bytes <= 64
    ? raw
    : invalid('whsec_ and 24 to 64 bytes in base64 (echo whsec_$(openssl rand -base64 32))');
};

/** A bearer credential: 32 to 256 visible ASCII characters, so it cannot be guessed (openssl rand -hex 32). */
export const scrapeSecret = (raw: string): string =>
  /^[\x21-\x7e]{32,256}$/.test(raw) ? raw : invalid('32 to 256 visible ASCII characters (openssl rand -hex 32)');

export const superUser = (raw: string): string =>
  /^[A-Za-z0-9._-]{1,64}\/[^\s,]{1,256}$/.test(raw)
    ? raw
    : invalid('tenant/principal, the tenant 1 to 64 characters of [A-Za-z0-9._-]');

/** An optional http(s) URL: empty means unset. */
export const optionalHttpUrl = (raw: string): string => httpUrl(raw);

export const hostPort = (raw: string): string =>
  /^[A-Za-z0-9.\-_[\]:]+:\d{1,5}$/.test(raw) ? raw : invalid('host:port');

export const httpUrl = (raw: string): string => {
  try {
    const url = new URL(raw);
    if (url.protocol === 'http:' || url.protocol === 'https:') return raw.replace(/\/+$/, '');
  } catch {
    /* falls through to the error below */
  }
  return invalid('an http(s) URL');
};

export const topicName = (raw: string): string =>
  /^[A-Za-z0-9._-]{1,249}$/.test(raw) ? raw : invalid('Kafka topic names ([A-Za-z0-9._-], at most 249 characters)');

export const instanceId = (raw: string): string =>
  /^[A-Za-z0-9._-]{1,64}$/.test(raw) ? raw : invalid('1 to 64 characters of [A-Za-z0-9._-]');

export function setting<T>(
  env: string,
  key: string,
  parse: (raw: string) => T,
  fallback: () => T,
  doc: string,
  shownDefault?: string,
): Setting<T> {
  return { env, key, parse, fallback, doc, shownDefault };
}

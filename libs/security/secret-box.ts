import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ConfigError, EventMeshConfig } from '@libs/config';

/** The version tag of a sealed secret: `v1:<keyId>:<iv base64>:<ciphertext and tag base64>`. */
const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** A sealed secret that cannot be opened: an unknown key id, a damaged or tampered value. Never carries the secret. */
export class SecretBoxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretBoxError';
  }
}

/**
 * Secrets at rest (webhook signing secrets, publisher secrets): AES-256-GCM under a key of
 * EVENTMESH_SECURITY_SECRETS_KEYS. A sealed value names the key that sealed it, so keys rotate: a new active
 * key seals every new value, the old keys still open the values they sealed, and a value written again is sealed
 * again with the active key ({@link reseal}). The authentication tag makes any change to a stored value an error,
 * never a different secret.
 */
export class SecretBox {
  private readonly keys: ReadonlyMap<string, Buffer>;

  constructor(
    keys: readonly { id: string; key: Buffer }[],
    readonly activeKey: string,
  ) {
    for (const k of keys) {
      if (k.key.length !== KEY_BYTES)
        throw new SecretBoxError(`key "${k.id}" is ${k.key.length} bytes; AES-256-GCM needs ${KEY_BYTES}`);
      if (!/^[A-Za-z0-9._-]{1,32}$/.test(k.id))
        throw new SecretBoxError(`key id "${k.id}" is not 1 to 32 characters of [A-Za-z0-9._-]`);
    }
    this.keys = new Map(keys.map((k) => [k.id, k.key]));
    if (!this.keys.has(activeKey))
      throw new SecretBoxError(
        `the active key "${activeKey}" is not among the keys (${[...this.keys.keys()].join(', ')})`,
      );
  }

  /** The box of an instance. An instance cannot run without one: no key is a configuration error (exit 78). */
  static fromConfig(config: EventMeshConfig): SecretBox {
    const { keys, activeKey } = config.security.secrets;
    if (keys.length === 0) {
      throw new ConfigError([
        'EVENTMESH_SECURITY_SECRETS_KEYS (eventmesh.security.secrets.keys) is not set; an instance needs it to encrypt secrets at rest. ' +
          'Legal values: a comma-separated list of id:key, id 1 to 32 characters of [A-Za-z0-9._-], key 32 bytes in base64, ' +
          'e.g. main:$(openssl rand -base64 32) (`npm start` creates one in .data/secrets/keys)',
      ]);
    }
    return new SecretBox(keys, activeKey);
  }

  /** True when `value` has the shape of a sealed secret (it says nothing of whether it opens). */
  static isSealed(value: string): boolean {
    return value.startsWith(`${VERSION}:`);
  }

  /** The id of the key that sealed `value`. */
  static keyIdOf(sealed: string): string {
    return parse(sealed).keyId;
  }

  /** Seals `plaintext` with the active key and a fresh random 96-bit IV. */
  seal(plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.activeKey)!, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${VERSION}:${this.activeKey}:${iv.toString('base64')}:${ciphertext.toString('base64')}`;
  }

  /** Opens a value sealed by any key of the box. Throws {@link SecretBoxError} for an unknown key or a changed value. */
  open(sealed: string): string {
    const { keyId, iv, data } = parse(sealed);
    const key = this.keys.get(keyId);
    if (!key) {
      throw new SecretBoxError(
        `the secret is sealed with key "${keyId}", which EVENTMESH_SECURITY_SECRETS_KEYS does not hold (it holds ${[...this.keys.keys()].join(', ')})`,
      );
    }
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]).toString(
        'utf8',
      );
    } catch {
      throw new SecretBoxError(
        `the secret sealed with key "${keyId}" does not authenticate: it was changed, or the key "${keyId}" is not the one that sealed it`,
      );
    }
  }

  /** True when `sealed` is sealed with another key than the active one (it is sealed again when written). */
  isStale(sealed: string): boolean {
    return SecretBox.keyIdOf(sealed) !== this.activeKey;
  }

  /** `sealed` sealed again with the active key (itself when it already is). */
  reseal(sealed: string): string {
    return this.isStale(sealed) ? this.seal(this.open(sealed)) : sealed;
  }
}

function parse(sealed: string): { keyId: string; iv: Buffer; data: Buffer } {
  const parts = sealed.split(':');
  if (parts.length !== 4 || parts[0] !== VERSION)
    throw new SecretBoxError(`not a sealed secret (expected ${VERSION}:<keyId>:<iv>:<ciphertext>)`);
  const [, keyId, ivText, dataText] = parts;
  const iv = Buffer.from(ivText, 'base64');
  const data = Buffer.from(dataText, 'base64');
  if (iv.length !== IV_BYTES || data.length < TAG_BYTES)
    throw new SecretBoxError(`the secret sealed with key "${keyId}" is damaged (bad IV or ciphertext length)`);
  return { keyId, iv, data };
}

import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { EventMeshConfig } from '@libs/config';

/** How far a token's time may be from the verifier's clock. */
const TOKEN_SKEW_MS = 60_000;
const INFO = 'eventmesh internal stream channel v1';

export type Verified = { ok: true; from: string } | { ok: false; reason: string };

/**
 * The credential of the internal stream channel (cluster-channel.ts), shared by every instance of one runtime
 * without configuration of its own: a key derived (HKDF-SHA256) from each key of EVENTMESH_SECURITY_SECRETS_KEYS,
 * which every instance already holds to open the secrets at rest. A connecting instance presents
 * `v1.<key id>.<its holder>.<time ms>.<HMAC>`, the HMAC over the key id, both holders and the time, under the
 * derived key of its active secrets key: whoever does not hold a secrets key cannot make one, a token names the
 * process it was made for (it is refused by any other), and it is good for a minute. The derived key is not the
 * secrets key: a token reveals nothing that opens a sealed secret.
 */
export class ClusterCredential {
  private readonly keys: ReadonlyMap<string, Buffer>;

  constructor(
    keys: readonly { id: string; key: Buffer }[],
    private readonly activeKey: string,
    private readonly now: () => number = Date.now,
  ) {
    this.keys = new Map(keys.map((k) => [k.id, Buffer.from(hkdfSync('sha256', k.key, 'eventmesh', INFO, 32))]));
    if (!this.keys.has(activeKey)) throw new Error(`the active key "${activeKey}" is not among the keys`);
  }

  static fromConfig(config: EventMeshConfig): ClusterCredential {
    const { keys, activeKey } = config.security.secrets;
    return new ClusterCredential(keys, activeKey);
  }

  /** A token for `from` to connect to the holder `to`. */
  sign(from: string, to: string): string {
    const at = this.now();
    return `v1.${this.activeKey}.${encode(from)}.${at}.${this.mac(this.activeKey, from, to, at)}`;
  }

  /** Whether `token` was made by a holder of a shared key, for the holder `self`, within the last minute. */
  verify(token: string | undefined, self: string): Verified {
    const parts = (token ?? '').split('.');
    if (parts.length !== 5 || parts[0] !== 'v1') return { ok: false, reason: 'no cluster token' };
    const [, keyId, fromEncoded, atText, mac] = parts;
    if (!this.keys.has(keyId)) return { ok: false, reason: `unknown key ${keyId}` };
    const at = Number(atText);
    if (!Number.isSafeInteger(at) || Math.abs(this.now() - at) > TOKEN_SKEW_MS)
      return { ok: false, reason: 'token expired' };
    const from = decode(fromEncoded);
    const expected = Buffer.from(this.mac(keyId, from, self, at), 'hex');
    const given = Buffer.from(mac, 'hex');
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      return { ok: false, reason: 'bad signature' };
    return { ok: true, from };
  }

  /**
   * A MAC of `text` under the active derived key, `<key id>.<hex>`: for what one process hands out and another must
   * trust (an SSE sessions connection's token names its process and address; a forged one must not make a gateway dial
   * elsewhere).
   */
  seal(text: string): string {
    return `${this.activeKey}.${this.sealMac(this.activeKey, text)}`;
  }

  /** Whether `sealed` is {@link seal}'s MAC of `text` under one of the keys. */
  opens(text: string, sealed: string): boolean {
    const at = sealed.indexOf('.');
    const keyId = sealed.slice(0, at);
    if (at <= 0 || !this.keys.has(keyId)) return false;
    const expected = Buffer.from(this.sealMac(keyId, text), 'hex');
    const given = Buffer.from(sealed.slice(at + 1), 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private sealMac(keyId: string, text: string): string {
    return createHmac('sha256', this.keys.get(keyId)!).update(`\u0000seal\u0000${text}`).digest('hex');
  }

  private mac(keyId: string, from: string, to: string, at: number): string {
    return createHmac('sha256', this.keys.get(keyId)!).update(`${keyId}\n${from}\n${to}\n${at}`).digest('hex');
  }
}

const encode = (s: string) => Buffer.from(s, 'utf8').toString('base64url');
const decode = (s: string) => Buffer.from(s, 'base64url').toString('utf8');

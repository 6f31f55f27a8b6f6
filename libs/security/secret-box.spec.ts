import { randomBytes } from 'node:crypto';
import { ConfigError, loadConfig } from '@libs/config';
import { SecretBox, SecretBoxError } from './secret-box';

describe('SecretBox', () => {
  const oldKey = { id: 'old', key: randomBytes(32) };
  const newKey = { id: 'new', key: randomBytes(32) };
  const secret = 'whsec_c2VjcmV0IGJ5dGVzIG9mIGEgd2ViaG9vaw==';

  it('round-trips, with the key id in the sealed value and a fresh IV each time', () => {
    const box = new SecretBox([oldKey], 'old');
    const a = box.seal(secret);
    const b = box.seal(secret);
    expect(a).toMatch(/^v1:old:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(a).not.toContain(secret.slice('whsec_'.length));
    expect(a).not.toBe(b);
    expect(box.open(a)).toBe(secret);
    expect(box.open(b)).toBe(secret);
    expect(Buffer.from(a.split(':')[2], 'base64')).toHaveLength(12);
  });

  it.each([
    ['a flipped ciphertext bit', (s: string) => mutate(s, 3)],
    ['a flipped IV bit', (s: string) => mutate(s, 2)],
    ['a truncated value', (s: string) => s.slice(0, -8)],
    ['another key id of the box', (s: string) => s.replace('v1:old:', 'v1:new:')],
  ])('refuses %s: an error, never another secret', (_, tamper) => {
    const box = new SecretBox([oldKey, newKey], 'old');
    expect(() => box.open(tamper(box.seal(secret)))).toThrow(SecretBoxError);
  });

  it('names an unknown key id clearly', () => {
    const sealed = new SecretBox([oldKey], 'old').seal(secret);
    expect(() => new SecretBox([newKey], 'new').open(sealed)).toThrow(
      'sealed with key "old", which EVENTMESH_SECURITY_SECRETS_KEYS does not hold (it holds new)',
    );
    expect(() => new SecretBox([newKey], 'new').open('whsec_plain')).toThrow('not a sealed secret');
  });

  it('rotates: old values still open, new ones are sealed with the active key, a write re-seals', () => {
    const before = new SecretBox([oldKey], 'old').seal(secret);
    const box = new SecretBox([newKey, oldKey], 'new');
    expect(box.open(before)).toBe(secret);
    expect(box.isStale(before)).toBe(true);
    const resealed = box.reseal(before);
    expect(SecretBox.keyIdOf(resealed)).toBe('new');
    expect(box.isStale(resealed)).toBe(false);
    expect(box.reseal(resealed)).toBe(resealed);
    expect(new SecretBox([newKey], 'new').open(resealed)).toBe(secret);
  });

  it('is required by an instance: no key is a ConfigError naming the setting and its legal values', () => {
    const config = loadConfig({ EVENTMESH_SECURITY_SECRETS_KEYS: '' });
    expect(() => SecretBox.fromConfig(config)).toThrow(ConfigError);
    expect(() => SecretBox.fromConfig(config)).toThrow(
      /EVENTMESH_SECURITY_SECRETS_KEYS .*Legal values: a comma-separated list of id:key/,
    );
    const configured = loadConfig({
      EVENTMESH_SECURITY_SECRETS_KEYS: `a:${oldKey.key.toString('base64')},b:${newKey.key.toString('base64')}`,
      EVENTMESH_SECURITY_SECRETS_ACTIVE_KEY: 'b',
    });
    expect(SecretBox.keyIdOf(SecretBox.fromConfig(configured).seal('x'))).toBe('b');
  });
});

/** `sealed` with one bit flipped in its `part`-th colon-separated part. */
function mutate(sealed: string, part: number): string {
  const parts = sealed.split(':');
  const bytes = Buffer.from(parts[part], 'base64');
  bytes[0] ^= 1;
  parts[part] = bytes.toString('base64');
  return parts.join(':');
}

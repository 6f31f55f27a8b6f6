import { VerifiedTokenCache } from './verified-token-cache';

describe('VerifiedTokenCache', () => {
  let now = 1000;
  const clock = () => now;

  it('answers a token until its expiry, not after', () => {
    const cache = new VerifiedTokenCache<string>(10, clock);
    const key = 'token-a';
    cache.set(key, 'alice', 2000);
    expect(cache.get(key)).toBe('alice');
    now = 1999;
    expect(cache.get(key)).toBe('alice');
    now = 2000;
    expect(cache.get(key)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('keeps at most maxEntries, dropping the least recently used', () => {
    now = 0;
    const cache = new VerifiedTokenCache<number>(2, clock);
    cache.set('a', 1, 10);
    cache.set('b', 2, 10);
    expect(cache.get('a')).toBe(1);
    cache.set('c', 3, 10);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([1, undefined, 3]);
    expect(cache.size).toBe(2);
  });

  it('holds nothing with maxEntries 0, nor a token already expired', () => {
    now = 0;
    const off = new VerifiedTokenCache<number>(0, clock);
    off.set('a', 1, 10);
    expect(off.get('a')).toBeUndefined();
    const cache = new VerifiedTokenCache<number>(5, clock);
    cache.set('a', 1, 0);
    expect(cache.size).toBe(0);
  });

  it('never drops a token in steady use, however many others come and go', () => {
    now = 0;
    const cache = new VerifiedTokenCache<number>(8, clock);
    cache.set('hot', 0, 10);
    for (let i = 0; i < 100; i++) {
      cache.set(`cold-${i}`, i, 10);
      expect(cache.get('hot')).toBe(0);
    }
    expect(cache.size).toBe(8);
  });
});

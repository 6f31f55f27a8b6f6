import fc from 'fast-check';
import { compileLikePattern, LikePart, likeMatches, LikePatternError } from './like-pattern';

/** The meaning of a LIKE pattern as a regular expression over code points: the reference the matcher must agree with. */
function reference(parts: LikePart[], text: string): boolean {
  const source = parts
    .map((p) => (p === 'any' ? '[\\s\\S]*' : p === 'one' ? '[\\s\\S]' : p.literal.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`, 'u').test(text);
}

function matches(pattern: string, text: string): boolean {
  return likeMatches(compileLikePattern(pattern), text);
}

/** Milliseconds one call takes. */
function timed(run: () => void): number {
  const start = performance.now();
  run();
  return performance.now() - start;
}

describe('LIKE pattern matching', () => {
  it.each([
    ['', '', true],
    ['', 'a', false],
    ['%', '', true],
    ['_', '', false],
    ['a%', 'a', true],
    ['%a', 'ba', true],
    ['%a%b%', 'xxaxxbxx', true],
    ['%a%b%', 'xxbxxaxx', false],
    ['%ab_d%', 'abxabcd', true],
    ['a%a', 'a', false],
    ['a%a', 'aa', true],
    ['%aa%aa', 'aaa', false],
    ['%aa%aa', 'aaaa', true],
    ['_%_', 'a', false],
    ['_%_', '\u{1F600}\u{1F601}', true],
  ])('%j against %j: %s', (pattern, text, expected) => {
    expect(matches(pattern, text)).toBe(expected);
    expect(reference(compileLikePattern(pattern), text)).toBe(expected);
  });

  it('refuses a backslash that escapes nothing', () => {
    expect(() => compileLikePattern('a\\b')).toThrow(LikePatternError);
    expect(() => compileLikePattern('a\\')).toThrow(LikePatternError);
  });

  it('agrees with the regular-expression meaning of the pattern (property, fixed seed)', () => {
    // Small alphabets make near-misses (the cases a greedy matcher gets wrong) frequent.
    const char = fc.constantFrom('a', 'b', '\u{1F600}');
    const part = fc.oneof(
      { weight: 3, arbitrary: char.map((c): LikePart => ({ literal: c })) },
      { weight: 1, arbitrary: fc.constant<LikePart>('one') },
      { weight: 1, arbitrary: fc.constant<LikePart>('any') },
    );
    const text = fc.array(char, { maxLength: 12 }).map((cs) => cs.join(''));
    fc.assert(
      fc.property(fc.array(part, { maxLength: 8 }), text, (parts, t) => likeMatches(parts, t) === reference(parts, t)),
      { seed: 9005, numRuns: 3000 },
    );
  });

  // The old matcher widened the last `%` one character at a time and re-compared the segment after it: pattern
  // length x text length, ~10^9 steps here (seconds). Segments matched greedily with bit-parallel search are
  // linear in the text for a fixed pattern. 1 s is a generous cap for a 1 MiB text on a loaded CI machine.
  it('matches a 1 MiB text against a long near-miss segment in linear time', () => {
    const text = 'a'.repeat(1 << 20);
    const pattern = `%${'a'.repeat(1000)}b%`;
    let result = true;
    const ms = timed(() => (result = matches(pattern, text)));
    expect(result).toBe(false);
    expect(ms).toBeLessThan(1000);
  });

  it('matches a 1 MiB text against a near-miss segment full of `_` in linear time', () => {
    const text = 'a'.repeat(1 << 20);
    const pattern = `%${'a_'.repeat(500)}b%`;
    let result = true;
    const ms = timed(() => (result = matches(pattern, text)));
    expect(result).toBe(false);
    expect(ms).toBeLessThan(1000);
  });
});

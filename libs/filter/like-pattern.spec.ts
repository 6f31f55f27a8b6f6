import fc from 'fast-check';
import { costRatio, growthFrom, GROWTH_LIMIT } from '../../test/support/growth';
import { compileLikeMatcher, compileLikePattern, LikePart, likeMatches, LikePatternError } from './like-pattern';

/** The meaning of a LIKE pattern as a regular expression over code points: the reference the matcher must agree with. */
function reference(parts: LikePart[], text: string): boolean {
  const source = parts
    .map((p) =>
      p === 'any' ? '[\\s\\S]*' : p === 'one' ? '[\\s\\S]' : p.literal.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&'),
    )
    .join('');
  return new RegExp(`^${source}$`, 'u').test(text);
}

function matches(pattern: string, text: string): boolean {
  return likeMatches(compileLikePattern(pattern), text);
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
  // linear in the text for a fixed pattern, and a segment costs a 32-bit word operation per 32 of its characters.
  // Two guards, each a comparison of two sizes on this machine rather than a clock bound (test/support/growth.ts):
  // the text 4 times longer costs about 4 times as much (a quadratic matcher: 16), and against a 1 MiB text the
  // long segment costs less than NOT_PER_CHARACTER times what a one-character segment does (measured: about 7; it
  // can be no more than its 32 words; the old matcher's ratio was about 400: a thousand comparisons for one).
  const NOT_PER_CHARACTER = 100;
  const oneCharacter = compileLikeMatcher(compileLikePattern('%b%'));
  const refuses = (matcher: ReturnType<typeof compileLikeMatcher>) => (text: string) => {
    if (likeMatches(matcher, text)) throw new Error('a near miss matched');
  };

  it('matches a 1 MiB text against a long near-miss segment in linear time', () => {
    const text = 'a'.repeat(1 << 20);
    const pattern = `%${'a'.repeat(1000)}b%`;
    expect(matches(pattern, text)).toBe(false);
    const matcher = compileLikeMatcher(compileLikePattern(pattern));
    expect(growthFrom(1 << 18, (n) => 'a'.repeat(n), refuses(matcher))).toBeLessThan(GROWTH_LIMIT);
    expect(costRatio(oneCharacter, matcher, (m) => refuses(m)(text), NOT_PER_CHARACTER)).toBeLessThan(
      NOT_PER_CHARACTER,
    );
  });

  it('matches a 1 MiB text against a near-miss segment full of `_` in linear time', () => {
    const text = 'a'.repeat(1 << 20);
    const pattern = `%${'a_'.repeat(500)}b%`;
    expect(matches(pattern, text)).toBe(false);
    const matcher = compileLikeMatcher(compileLikePattern(pattern));
    expect(growthFrom(1 << 18, (n) => 'a'.repeat(n), refuses(matcher))).toBeLessThan(GROWTH_LIMIT);
    expect(costRatio(oneCharacter, matcher, (m) => refuses(m)(text), NOT_PER_CHARACTER)).toBeLessThan(
      NOT_PER_CHARACTER,
    );
  });
});

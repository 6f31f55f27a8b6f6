/**
 * CESQL `LIKE` patterns: `%` is any run of characters, `_` exactly one character (a Unicode code point), and `\`
 * makes the next `%`, `_` or `\` literal.
 *
 * Matching is linear in the text. The pattern is split at its `%`s into segments of literals and `_`; the first
 * segment must match at the start, the last at the end, and each one between at its leftmost place after the
 * previous one (taking the leftmost place never loses a match: it leaves the most text for what follows). A
 * segment is searched for with a bit-parallel automaton (shift-and), one pass over the text it scans, and the
 * middle segments scan disjoint stretches of the text. Cost: text length x ceil(longest segment / 32) word
 * operations; a pattern is at most CESQL_MAX_LENGTH characters, so at most 128 words per character, and one
 * word for segments of up to 32 characters. There is no backtracking.
 */

/** One element of a compiled LIKE pattern: `%`, `_`, or one literal character (a Unicode code point). */
export type LikePart = 'any' | 'one' | { literal: string };

/** A pattern that means nothing definite (a `\` that escapes nothing). */
export class LikePatternError extends Error {}

/**
 * `%` is any run of characters, `_` exactly one, and `\` makes the next `%`, `_` or `\` literal. Any other use of
 * `\` is refused rather than guessed at, so a pattern means one thing.
 */
export function compileLikePattern(pattern: string): LikePart[] {
  const chars = Array.from(pattern);
  const parts: LikePart[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    if (c === '\\') {
      const escaped = chars[++i];
      if (escaped !== '%' && escaped !== '_' && escaped !== '\\') {
        throw new LikePatternError("'\\' must be followed by %, _ or \\");
      }
      parts.push({ literal: escaped });
    } else if (c === '%') {
      // Runs of `%` mean the same as one.
      if (parts[parts.length - 1] !== 'any') parts.push('any');
    } else {
      parts.push(c === '_' ? 'one' : { literal: c });
    }
  }
  return parts;
}

/** `_` in a segment's code points. */
const ONE = -1;

/** A run of the pattern without `%`: code points, ONE for `_`, and its shift-and masks. */
interface Segment {
  readonly units: Int32Array;
  /** 32-bit words per state. */
  readonly words: number;
  /** Per literal code point: bit j set when unit j is that code point or `_`. */
  readonly masks: Map<number, Uint32Array>;
  /** For any other code point: bit j set when unit j is `_`. */
  readonly otherMask: Uint32Array;
}

/** A compiled pattern, built once (at parse time) and used for every event. */
export interface LikeMatcher {
  /** Segments in order; there is one more than there are `%`s. */
  readonly segments: readonly Segment[];
}

export function compileLikeMatcher(parts: readonly LikePart[]): LikeMatcher {
  const runs: number[][] = [[]];
  for (const part of parts) {
    // `%%` means `%`: no empty segment between two of them.
    if (part === 'any') {
      if (runs.length === 1 || runs[runs.length - 1].length > 0) runs.push([]);
    } else runs[runs.length - 1].push(part === 'one' ? ONE : part.literal.codePointAt(0)!);
  }
  return { segments: runs.map(segment) };
}

function segment(units: number[]): Segment {
  const words = Math.max(1, Math.ceil(units.length / 32));
  const otherMask = new Uint32Array(words);
  units.forEach((u, j) => {
    if (u === ONE) otherMask[j >>> 5] |= 1 << (j & 31);
  });
  const masks = new Map<number, Uint32Array>();
  units.forEach((u, j) => {
    if (u === ONE) return;
    let mask = masks.get(u);
    if (!mask) masks.set(u, (mask = Uint32Array.from(otherMask)));
    mask[j >>> 5] |= 1 << (j & 31);
  });
  return { units: Int32Array.from(units), words, masks, otherMask };
}

/** True when the whole of `text` matches the pattern. */
export function likeMatches(pattern: readonly LikePart[] | LikeMatcher, text: string): boolean {
  const { segments } = 'segments' in pattern ? pattern : compileLikeMatcher(pattern);
  const chars = codePoints(text);
  const first = segments[0];
  const n = chars.length;
  if (segments.length === 1) return n === first.units.length && matchesAt(first, chars, 0);
  const last = segments[segments.length - 1];
  const end = n - last.units.length;
  if (end < first.units.length || !matchesAt(first, chars, 0) || !matchesAt(last, chars, end)) return false;
  let from = first.units.length;
  for (let i = 1; i < segments.length - 1; i++) {
    const found = findEnd(segments[i], chars, from, end);
    if (found < 0) return false;
    from = found;
  }
  return true;
}

/** The code points of `text`, so that `_` is one character however many UTF-16 units it takes. */
function codePoints(text: string): Int32Array {
  const out = new Int32Array(text.length);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.codePointAt(i)!;
    out[n++] = c;
    if (c > 0xffff) i++;
  }
  return out.subarray(0, n);
}

function matchesAt(seg: Segment, chars: Int32Array, at: number): boolean {
  const units = seg.units;
  for (let j = 0; j < units.length; j++) if (units[j] !== ONE && units[j] !== chars[at + j]) return false;
  return true;
}

/**
 * Where the leftmost occurrence of `seg` within chars[from, to) ends, or -1. Shift-and: bit j of the state is set
 * when the last j + 1 characters read match the first j + 1 units of the segment.
 */
function findEnd(seg: Segment, chars: Int32Array, from: number, to: number): number {
  const length = seg.units.length;
  const words = seg.words;
  const top = (length - 1) >>> 5;
  const topBit = 1 << ((length - 1) & 31);
  const state = new Uint32Array(words);
  for (let i = from; i < to; i++) {
    const mask = seg.masks.get(chars[i]) ?? seg.otherMask;
    let carry = 1;
    for (let w = 0; w < words; w++) {
      const s = state[w];
      state[w] = ((s << 1) | carry) & mask[w];
      carry = s >>> 31;
    }
    if (state[top] & topBit) return i + 1;
  }
  return -1;
}

import { compileLikeMatcher, LikeMatcher, likeMatches, LikePart } from '@libs/filter';

/** The longest pattern: a Kafka topic name's length. */
export const TOPIC_PATTERN_MAX_LENGTH = 249;

/** Characters of a Kafka topic name, and the two wildcards. */
const PATTERN_CHARS = /^[A-Za-z0-9._\-*?]+$/;

/** A topic pattern that means nothing: empty, too long, or with a character no topic name has. */
export class TopicPatternError extends Error {}

/**
 * An ACL rule's topic pattern: a topic name, or a glob where `*` is any run of characters (none included) and `?`
 * exactly one; `*` alone matches every topic, and also a request that names no topic (GET /subscriptions, the
 * admin API). Compiled once, when the rules load, to the linear LIKE matcher of libs/filter/like-pattern.ts
 * (`*` is `%`, `?` is `_`): matching never backtracks, whatever the pattern.
 */
export interface TopicPattern {
  readonly source: string;
  /** True for `*` (and `**`...): every topic, and no topic. */
  readonly everything: boolean;
  matches(topic: string | undefined): boolean;
}

export function compileTopicPattern(source: string): TopicPattern {
  if (source.length === 0) throw new TopicPatternError('the topic pattern is empty');
  if (source.length > TOPIC_PATTERN_MAX_LENGTH)
    throw new TopicPatternError(`the topic pattern is longer than ${TOPIC_PATTERN_MAX_LENGTH} characters`);
  if (!PATTERN_CHARS.test(source))
    throw new TopicPatternError('a topic pattern holds [A-Za-z0-9._-] and the wildcards * and ?');
  const parts: LikePart[] = Array.from(source, (c) => (c === '*' ? 'any' : c === '?' ? 'one' : { literal: c }));
  const everything = /^\*+$/.test(source);
  const literal = !/[*?]/.test(source);
  const matcher: LikeMatcher = compileLikeMatcher(parts);
  return {
    source,
    everything,
    matches: (topic) => {
      if (everything) return true;
      if (topic === undefined) return false;
      return literal ? topic === source : likeMatches(matcher, topic);
    },
  };
}

import type { EventFrame } from '@libs/frame';
import { ATTRIBUTE_NAME, attributeOf } from './attributes';
import {
  compileLikeMatcher,
  compileLikePattern,
  LikeMatcher,
  LikePart,
  likeMatches,
  LikePatternError,
} from './like-pattern';

/**
 * A subset of the CloudEvents SQL Expression Language (CESQL 1.0), the `sql` filter dialect: a hand-written
 * tokenizer, a recursive-descent parser and an evaluator. README.md lists the subset and where it departs from
 * the spec. Everything that can be checked without an event is checked by `parseCesql`, so a subscription with
 * a bad expression is refused when it is created; `evaluateCesql` never throws.
 */

/** Longest expression accepted; bounds parse time and the size of what a subscription stores. */
export const CESQL_MAX_LENGTH = 4096;
/** Deepest nesting of parentheses, NOT, unary minus, IN lists and function calls; keeps recursion shallow. */
export const CESQL_MAX_DEPTH = 64;

const INT_MIN = -2147483648;
const INT_MAX = 2147483647;

export type CesqlValue = string | number | boolean;
export type ComparisonOperator = '=' | '!=' | '<>' | '<' | '<=' | '>' | '>=';
export type LogicalOperator = 'AND' | 'OR' | 'XOR';
export type CesqlFunction = 'LENGTH' | 'LOWER' | 'UPPER';

export type CesqlNode =
  | { kind: 'literal'; value: CesqlValue }
  | { kind: 'attribute'; name: string }
  | { kind: 'exists'; name: string }
  | { kind: 'not'; operand: CesqlNode }
  | { kind: 'negate'; operand: CesqlNode }
  | { kind: 'logical'; operator: LogicalOperator; operands: CesqlNode[] }
  | { kind: 'comparison'; operator: ComparisonOperator; left: CesqlNode; right: CesqlNode }
  | { kind: 'like'; operand: CesqlNode; pattern: LikePart[]; matcher: LikeMatcher; negated: boolean }
  | { kind: 'in'; operand: CesqlNode; set: CesqlNode[]; negated: boolean }
  | { kind: 'call'; name: CesqlFunction; argument: CesqlNode };

/**
 * Default of CesqlOptions.maxAttributeChars (and of EVENTMESH_FILTER_MAX_ATTRIBUTE_CHARS): long enough for any
 * sensible context attribute, short enough that the costliest expression stays in the milliseconds per event.
 */
export const CESQL_DEFAULT_MAX_ATTRIBUTE_CHARS = 16384;

export interface CesqlOptions {
  /**
   * Longest string (in UTF-16 units) an evaluation works on: an attribute read, or a LOWER/UPPER result. A longer
   * one is an evaluation error, so the expression is false for that event (fail-fast, like a failed cast).
   */
  maxAttributeChars?: number;
}

export interface CesqlExpression {
  readonly text: string;
  readonly root: CesqlNode;
  /** CesqlOptions.maxAttributeChars, resolved. */
  readonly maxAttributeChars: number;
}

/** A refused expression. `position` is the 0-based character offset of the offending token. */
export class CesqlParseError extends Error {
  constructor(
    readonly reason: string,
    readonly position: number,
  ) {
    super(`${reason} at position ${position}`);
    this.name = 'CesqlParseError';
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Tokenizer

type TokenKind = 'string' | 'integer' | 'word' | 'symbol' | 'end';

interface Token {
  kind: TokenKind;
  /** Decoded value for strings, the source text otherwise. */
  text: string;
  position: number;
}

/** Two-character symbols first, so `<=` is not read as `<` followed by `=`. */
const SYMBOLS = ['<=', '>=', '<>', '!=', '=', '<', '>', '(', ')', ',', '-'];
const ARITHMETIC = new Set(['+', '*', '/', '%']);
const WORD_CHAR = /[A-Za-z0-9_]/;
const WHITESPACE = /\s/;

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (WHITESPACE.test(c)) {
      i++;
      continue;
    }
    const read = readToken(text, i);
    tokens.push(read.token);
    i = read.next;
  }
  tokens.push({ kind: 'end', text: '', position: text.length });
  return tokens;
}

interface Read {
  token: Token;
  next: number;
}

function readToken(text: string, start: number): Read {
  const c = text[start];
  if (c === "'" || c === '"') return readString(text, start);
  return WORD_CHAR.test(c) ? readWord(text, start) : readSymbol(text, start);
}

/** A quoted string; the quote character is escaped by doubling it (`'it''s'`, `"say ""hi"""`). */
function readString(text: string, start: number): Read {
  const quote = text[start];
  let value = '';
  let i = start + 1;
  for (;;) {
    const close = text.indexOf(quote, i);
    if (close < 0) throw new CesqlParseError('unterminated string literal', start);
    value += text.slice(i, close);
    if (text[close + 1] !== quote) return { token: { kind: 'string', text: value, position: start }, next: close + 1 };
    value += quote;
    i = close + 2;
  }
}

/** Keywords, identifiers, function names and integers are all runs of word characters; digits only is an integer. */
function readWord(text: string, start: number): Read {
  let end = start;
  while (end < text.length && WORD_CHAR.test(text[end])) end++;
  const word = text.slice(start, end);
  return { token: { kind: /^[0-9]+$/.test(word) ? 'integer' : 'word', text: word, position: start }, next: end };
}

function readSymbol(text: string, start: number): Read {
  const symbol = SYMBOLS.find((s) => text.startsWith(s, start));
  if (symbol !== undefined) {
    return { token: { kind: 'symbol', text: symbol, position: start }, next: start + symbol.length };
  }
  // Whole code point, so the message does not show half of a surrogate pair.
  const c = String.fromCodePoint(text.codePointAt(start) ?? 0);
  if (ARITHMETIC.has(c)) throw new CesqlParseError(`arithmetic operator '${c}' is not supported`, start);
  throw new CesqlParseError(`unexpected character '${c}'`, start);
}

// ---------------------------------------------------------------------------------------------------------------
// Parser
//
//   or         := xor ( OR xor )*
//   xor        := and ( XOR and )*
//   and        := not ( AND not )*
//   not        := NOT not | predicate
//   predicate  := unary [ compare-op unary | [NOT] LIKE string | [NOT] IN '(' or ( ',' or )* ')' ]
//   unary      := '-' unary | primary
//   primary    := string | integer | TRUE | FALSE | EXISTS name | function '(' or ')' | name | '(' or ')'

const COMPARISON_OPERATORS = new Set<string>(['=', '!=', '<>', '<', '<=', '>', '>=']);
const FUNCTIONS = new Set<string>(['LENGTH', 'LOWER', 'UPPER']);
const KEYWORDS = new Set(['AND', 'OR', 'XOR', 'NOT', 'LIKE', 'IN', 'EXISTS', 'TRUE', 'FALSE']);

function describeToken(token: Token): string {
  if (token.kind === 'end') return 'the end of the expression';
  if (token.kind === 'string') return `string ${JSON.stringify(token.text)}`;
  return `'${token.text}'`;
}

class Parser {
  private index = 0;
  private depth = 0;

  constructor(private readonly tokens: Token[]) {}

  parse(): CesqlNode {
    const root = this.parseOr();
    const rest = this.peek();
    if (rest.kind !== 'end') throw this.error(`unexpected ${describeToken(rest)} after a complete expression`, rest);
    return root;
  }

  private parseOr(): CesqlNode {
    return this.parseLogical('OR', () => this.parseXor());
  }

  private parseXor(): CesqlNode {
    return this.parseLogical('XOR', () => this.parseAnd());
  }

  private parseAnd(): CesqlNode {
    return this.parseLogical('AND', () => this.parseNot());
  }

  /** A chain of one operator is kept flat (`a AND b AND c` is one node) so long chains do not deepen the tree. */
  private parseLogical(operator: LogicalOperator, operand: () => CesqlNode): CesqlNode {
    const operands = [operand()];
    while (this.acceptKeyword(operator)) operands.push(operand());
    return operands.length === 1 ? operands[0] : { kind: 'logical', operator, operands };
  }

  private parseNot(): CesqlNode {
    const token = this.peek();
    if (!isKeyword(token, 'NOT')) return this.parsePredicate();
    this.index++;
    return this.nested(token, () => ({ kind: 'not', operand: this.parseNot() }));
  }

  private parsePredicate(): CesqlNode {
    const left = this.parseUnary();
    const next = this.peek();
    if (next.kind === 'symbol' && COMPARISON_OPERATORS.has(next.text)) return this.parseComparison(left);
    const negated = isKeyword(next, 'NOT');
    if (negated) {
      const after = this.tokens[this.index + 1];
      if (!isKeyword(after, 'LIKE') && !isKeyword(after, 'IN')) {
        throw this.error(`expected LIKE or IN after NOT but found ${describeToken(after)}`, after);
      }
      this.index++;
    }
    if (this.acceptKeyword('LIKE')) {
      const pattern = this.parseLikePattern();
      return { kind: 'like', operand: left, pattern, matcher: compileLikeMatcher(pattern), negated };
    }
    const inToken = this.peek();
    if (this.acceptKeyword('IN')) return { kind: 'in', operand: left, set: this.parseSet(inToken), negated };
    return left;
  }

  /** Comparisons do not chain: `a < b < c` compares a boolean with `c`, which is never what was meant. */
  private parseComparison(left: CesqlNode): CesqlNode {
    const operator = this.advance().text as ComparisonOperator;
    const right = this.parseUnary();
    const next = this.peek();
    if (next.kind === 'symbol' && COMPARISON_OPERATORS.has(next.text)) {
      throw this.error(`comparison operators do not chain; add parentheses before '${next.text}'`, next);
    }
    return { kind: 'comparison', operator, left, right };
  }

  /** The spec requires the pattern to be a string literal, which lets it be compiled (and checked) here. */
  private parseLikePattern(): LikePart[] {
    const token = this.advance();
    if (token.kind !== 'string') {
      throw this.error(`LIKE needs a string literal pattern but found ${describeToken(token)}`, token);
    }
    try {
      return compileLikePattern(token.text);
    } catch (e) {
      if (e instanceof LikePatternError)
        throw new CesqlParseError(`invalid LIKE pattern: ${e.message}`, token.position);
      throw e;
    }
  }

  private parseSet(inToken: Token): CesqlNode[] {
    this.expect('(');
    return this.nested(inToken, () => {
      const set = [this.parseOr()];
      while (this.acceptSymbol(',')) set.push(this.parseOr());
      this.expect(')');
      return set;
    });
  }

  private parseUnary(): CesqlNode {
    const token = this.peek();
    if (!isSymbol(token, '-')) return this.parsePrimary();
    this.index++;
    const next = this.peek();
    // `-2147483648` is a literal in range although `2147483648` is not, so the sign is folded into the literal.
    if (next.kind === 'integer') {
      this.index++;
      return { kind: 'literal', value: this.integer(next, true) };
    }
    return this.nested(token, () => ({ kind: 'negate', operand: this.parseUnary() }));
  }

  private parsePrimary(): CesqlNode {
    const token = this.advance();
    if (token.kind === 'string') return { kind: 'literal', value: token.text };
    if (token.kind === 'integer') return { kind: 'literal', value: this.integer(token, false) };
    if (token.kind === 'word') return this.parseWord(token);
    if (isSymbol(token, '(')) {
      return this.nested(token, () => {
        const inner = this.parseOr();
        this.expect(')');
        return inner;
      });
    }
    throw this.error(`expected an expression but found ${describeToken(token)}`, token);
  }

  private parseWord(token: Token): CesqlNode {
    const upper = token.text.toUpperCase();
    if (upper === 'TRUE' || upper === 'FALSE') return { kind: 'literal', value: upper === 'TRUE' };
    if (upper === 'EXISTS') {
      return { kind: 'exists', name: this.attributeName(this.advance(), 'EXISTS needs an attribute name') };
    }
    if (isSymbol(this.peek(), '(')) return this.parseCall(token);
    return { kind: 'attribute', name: this.attributeName(token, 'expected an expression') };
  }

  private parseCall(token: Token): CesqlNode {
    const name = token.text.toUpperCase();
    if (!FUNCTIONS.has(name)) {
      throw this.error(`unknown function '${token.text}' (supported: LENGTH, LOWER, UPPER)`, token);
    }
    this.expect('(');
    const args = this.nested(token, () => {
      const list: CesqlNode[] = [];
      if (!isSymbol(this.peek(), ')')) {
        do list.push(this.parseOr());
        while (this.acceptSymbol(','));
      }
      this.expect(')');
      return list;
    });
    if (args.length !== 1) throw this.error(`${name} takes exactly 1 argument, got ${args.length}`, token);
    return { kind: 'call', name: name as CesqlFunction, argument: args[0] };
  }

  private attributeName(token: Token, context: string): string {
    if (token.kind !== 'word' || KEYWORDS.has(token.text.toUpperCase())) {
      const found = token.kind === 'word' ? `keyword ${token.text.toUpperCase()}` : describeToken(token);
      throw this.error(`${context} but found ${found}`, token);
    }
    if (!ATTRIBUTE_NAME.test(token.text)) {
      throw this.error(`attribute name '${token.text}' must be lower-case letters and digits`, token);
    }
    return token.text;
  }

  private integer(token: Token, negative: boolean): number {
    const magnitude = Number(token.text);
    // `0 - x` rather than `-x` so that `-0` is plain 0.
    const value = negative ? 0 - magnitude : magnitude;
    if (value < INT_MIN || value > INT_MAX) {
      throw this.error(`integer ${negative ? '-' : ''}${token.text} is outside the 32-bit signed range`, token);
    }
    return value;
  }

  /** Runs `parse` one level deeper, refusing expressions nested beyond CESQL_MAX_DEPTH. */
  private nested<T>(token: Token, parse: () => T): T {
    if (++this.depth > CESQL_MAX_DEPTH) {
      throw this.error(`expression nests deeper than ${CESQL_MAX_DEPTH} levels`, token);
    }
    try {
      return parse();
    } finally {
      this.depth--;
    }
  }

  private peek(): Token {
    return this.tokens[this.index];
  }

  /** Never moves past the `end` token, so every look-ahead sees a token. */
  private advance(): Token {
    const token = this.tokens[this.index];
    if (token.kind !== 'end') this.index++;
    return token;
  }

  private acceptKeyword(keyword: string): boolean {
    if (!isKeyword(this.peek(), keyword)) return false;
    this.index++;
    return true;
  }

  private acceptSymbol(symbol: string): boolean {
    if (!isSymbol(this.peek(), symbol)) return false;
    this.index++;
    return true;
  }

  private expect(symbol: string): Token {
    const token = this.advance();
    if (!isSymbol(token, symbol)) throw this.error(`expected '${symbol}' but found ${describeToken(token)}`, token);
    return token;
  }

  private error(reason: string, token: Token): CesqlParseError {
    return new CesqlParseError(reason, token.position);
  }
}

function isKeyword(token: Token, keyword: string): boolean {
  return token.kind === 'word' && token.text.toUpperCase() === keyword;
}

function isSymbol(token: Token, symbol: string): boolean {
  return token.kind === 'symbol' && token.text === symbol;
}

type ValueType = 'string' | 'integer' | 'boolean';

function typeOf(value: CesqlValue): ValueType {
  return typeof value === 'number' ? 'integer' : typeof value === 'string' ? 'string' : 'boolean';
}

/** The type a node yields when it can be known without an event (attributes can be any type). */
function staticType(node: CesqlNode): ValueType | 'unknown' {
  switch (node.kind) {
    case 'literal':
      return typeOf(node.value);
    case 'attribute':
      return 'unknown';
    case 'negate':
      return 'integer';
    case 'call':
      return node.name === 'LENGTH' ? 'integer' : 'string';
    default:
      return 'boolean';
  }
}

/**
 * Parses and checks a CESQL expression. Throws CesqlParseError, whose message names the 0-based character
 * position, for anything that can be refused without an event: syntax, unknown functions, bad LIKE patterns,
 * out-of-range integers, and expressions that can only yield a string or an integer (a filter needs a boolean).
 */
export function parseCesql(text: string, options: CesqlOptions = {}): CesqlExpression {
  if (text.length > CESQL_MAX_LENGTH) {
    const reason = `expression is ${text.length} characters long; the limit is ${CESQL_MAX_LENGTH}`;
    throw new CesqlParseError(reason, CESQL_MAX_LENGTH);
  }
  const tokens = tokenize(text);
  if (tokens.length === 1) throw new CesqlParseError('empty expression', 0);
  const root = new Parser(tokens).parse();
  const type = staticType(root);
  if (type === 'string' || type === 'integer') {
    const yields = type === 'integer' ? 'an integer' : 'a string';
    throw new CesqlParseError(`the expression yields ${yields}, not a boolean`, tokens[0].position);
  }
  return { text, root, maxAttributeChars: options.maxAttributeChars ?? CESQL_DEFAULT_MAX_ATTRIBUTE_CHARS };
}

// ---------------------------------------------------------------------------------------------------------------
// Evaluator
//
// Fail-fast error handling (CESQL 4.1): a missing attribute or a failed cast ends the evaluation, and the filter
// does not match (CESQL 1.2: an event MUST NOT pass a filter whose evaluation raised an error).

class EvaluationFailure extends Error {}

/** One shared instance: failing is routine at dispatch time (a missing extension), so no stack is built per event. */
const FAILURE = new EvaluationFailure('CESQL evaluation failed');

function fail(): never {
  throw FAILURE;
}

function isInt32(value: number): boolean {
  return Number.isInteger(value) && value >= INT_MIN && value <= INT_MAX;
}

function toBoolean(value: CesqlValue): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value !== 0;
  const lower = value.toLowerCase();
  return lower === 'true' ? true : lower === 'false' ? false : fail();
}

function toInteger(value: CesqlValue): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (!/^[+-]?[0-9]+$/.test(value)) return fail();
  const parsed = Number(value);
  return isInt32(parsed) ? parsed : fail();
}

function toText(value: CesqlValue): string {
  return String(value);
}

function castTo(type: ValueType, value: CesqlValue): CesqlValue {
  return type === 'integer' ? toInteger(value) : type === 'boolean' ? toBoolean(value) : toText(value);
}

/**
 * Equality of two values of possibly different types. Integer against String compares as integers whichever
 * side the string is on (so `sequence = 10` and `10 = sequence` agree); any other mix casts to the type of
 * `target`, which is the right operand for `=` (CESQL 3.7: `TRUE = "TRUE"` is false) and the left for `IN`.
 */
function equal(left: CesqlValue, right: CesqlValue, target: CesqlValue): boolean {
  const leftType = typeOf(left);
  const rightType = typeOf(right);
  let type = typeOf(target);
  if (leftType === rightType) type = leftType;
  else if (leftType !== 'boolean' && rightType !== 'boolean') type = 'integer';
  return castTo(type, left) === castTo(type, right);
}

/** What one evaluation reads: the event, and the longest string it may work on. */
interface Scope {
  frame: EventFrame;
  maxChars: number;
}

/** A string longer than the bound ends the evaluation: no operator then costs more than the bound allows. */
function bounded(value: CesqlValue, scope: Scope): CesqlValue {
  return typeof value === 'string' && value.length > scope.maxChars ? fail() : value;
}

function readAttribute(scope: Scope, name: string): CesqlValue {
  const value = attributeOf(scope.frame, name);
  if (value === undefined) return fail();
  if (typeof value === 'string') return bounded(value, scope);
  // CESQL integers are 32-bit; any other number is carried as its text (CESQL 3.2: non-CESQL types are Strings).
  return typeof value === 'number' && !isInt32(value) ? String(value) : value;
}

function compare(operator: ComparisonOperator, left: CesqlValue, right: CesqlValue): boolean {
  switch (operator) {
    case '=':
      return equal(left, right, right);
    case '!=':
    case '<>':
      return !equal(left, right, right);
    case '<':
      return toInteger(left) < toInteger(right);
    case '<=':
      return toInteger(left) <= toInteger(right);
    case '>':
      return toInteger(left) > toInteger(right);
    case '>=':
      return toInteger(left) >= toInteger(right);
  }
}

/** AND and OR short-circuit (CESQL 3.4.2), so `EXISTS x AND x = 1` never reads a missing `x`. */
function logical(operator: LogicalOperator, operands: CesqlNode[], scope: Scope): boolean {
  if (operator === 'AND') return operands.every((operand) => toBoolean(evaluate(operand, scope)));
  if (operator === 'OR') return operands.some((operand) => toBoolean(evaluate(operand, scope)));
  return operands.reduce((acc, operand) => acc !== toBoolean(evaluate(operand, scope)), false);
}

function isIn(node: Extract<CesqlNode, { kind: 'in' }>, scope: Scope): boolean {
  const value = evaluate(node.operand, scope);
  const found = node.set.some((element) => equal(value, evaluate(element, scope), value));
  return found !== node.negated;
}

function call(name: CesqlFunction, value: CesqlValue): CesqlValue {
  const text = toText(value);
  // LENGTH counts characters (code points), not UTF-16 units.
  if (name === 'LENGTH') return Array.from(text).length;
  return name === 'LOWER' ? text.toLowerCase() : text.toUpperCase();
}

function negate(value: CesqlValue): number {
  const result = 0 - toInteger(value);
  return isInt32(result) ? result : fail();
}

function evaluate(node: CesqlNode, scope: Scope): CesqlValue {
  switch (node.kind) {
    case 'literal':
      return node.value;
    case 'attribute':
      return readAttribute(scope, node.name);
    case 'exists':
      return attributeOf(scope.frame, node.name) !== undefined;
    case 'not':
      return !toBoolean(evaluate(node.operand, scope));
    case 'negate':
      return negate(evaluate(node.operand, scope));
    case 'logical':
      return logical(node.operator, node.operands, scope);
    case 'comparison':
      return compare(node.operator, evaluate(node.left, scope), evaluate(node.right, scope));
    case 'like':
      return likeMatches(node.matcher, toText(evaluate(node.operand, scope))) !== node.negated;
    case 'in':
      return isIn(node, scope);
    case 'call':
      return bounded(call(node.name, evaluate(node.argument, scope)), scope);
  }
}

/**
 * True when the expression yields the boolean TRUE for the event. False when it yields FALSE, a non-boolean,
 * or fails (a missing attribute, a failed cast, an integer overflow, a string longer than maxAttributeChars).
 * Never throws: it runs at dispatch time. Its cost is linear in the expression's size times the string bound.
 */
export function evaluateCesql(expression: CesqlExpression, frame: EventFrame): boolean {
  try {
    return evaluate(expression.root, { frame, maxChars: expression.maxAttributeChars }) === true;
  } catch {
    // Besides EvaluationFailure, anything unforeseen also means "does not match": one filter must never stop
    // delivery for a whole partition.
    return false;
  }
}

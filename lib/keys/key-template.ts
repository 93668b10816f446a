import { LockKeyError } from '../errors/errors';
import { keyMessages, messages } from '../errors/messages';

/** One `<a.b.c>` placeholder: the path to follow from its root. */
export interface Placeholder {
  readonly text: string;
  /** Never empty: its first segment is the root (a parameter name or an argument index). */
  readonly path: readonly [string, ...string[]];
  /** Characters a value must not contain raw: the first character of the literal that follows. */
  readonly escape: string;
}

/** A parsed key template: literals and placeholders, alternating. */
export interface KeyTemplate {
  readonly source: string;
  readonly parts: readonly (string | Placeholder)[];
  readonly placeholders: readonly Placeholder[];
}

const PATH_SEGMENT = /^[A-Za-z_$][\w$-]*$|^\d+$/;

/**
 * Parses `'voucher:<voucherId>:user:<body.userId>'`. Rejects what could make two different
 * inputs share a key (two placeholders with nothing between them) or cannot be resolved.
 */
export function parseKeyTemplate(source: string): KeyTemplate {
  if (typeof source !== 'string' || source.length === 0) {
    throw new LockKeyError(keyMessages.badTemplate(String(source), 'it is empty'));
  }
  const parts: (string | Placeholder)[] = [];
  const pattern = /<([^<>]*)>/g;
  let last = 0;
  for (let match = pattern.exec(source); match; match = pattern.exec(source)) {
    const literal = source.slice(last, match.index);
    assertLiteral(source, literal);
    if (literal) parts.push(literal);
    else if (parts.length > 0) {
      throw new LockKeyError(
        keyMessages.badTemplate(
          source,
          'two placeholders touch; put a separator such as ":" between them',
        ),
      );
    }
    // The pattern's one group is not optional, so a match always has it.
    const inside = match[1]!;
    const text = inside.trim();
    // split() returns at least one string, even for ''.
    const path = text.split('.') as [string, ...string[]];
    if (!text || !path.every((segment) => PATH_SEGMENT.test(segment))) {
      throw new LockKeyError(
        keyMessages.badTemplate(source, `<${inside}> is not a name or dotted path`),
      );
    }
    parts.push({ text, path, escape: '' });
    last = match.index + match[0].length;
  }
  const tail = source.slice(last);
  assertLiteral(source, tail);
  if (tail) parts.push(tail);

  // A placeholder that another one follows escapes the first character of the literal between
  // them, so the key reads back unambiguously: distinct argument tuples never render the same key.
  // The last one needs no such escape: the text after it is fixed, so its value is what is left.
  const resolved = parts.map((part, index) => {
    if (typeof part === 'string') return part;
    const next = parts[index + 1];
    if (typeof next !== 'string' || index + 2 >= parts.length) return part;
    if (next.startsWith('%')) {
      throw new LockKeyError(
        keyMessages.badTemplate(
          source,
          'the text between two placeholders starts with "%", which starts every escape; ' +
            'put another separator such as ":" first',
        ),
      );
    }
    // By code point: a separator outside the BMP (an emoji) must not be split into halves.
    return { ...part, escape: String.fromCodePoint(next.codePointAt(0)!) };
  });
  return {
    source,
    parts: resolved,
    placeholders: resolved.filter((part): part is Placeholder => typeof part !== 'string'),
  };
}

function assertLiteral(source: string, literal: string): void {
  if (/[<>]/.test(literal)) {
    throw new LockKeyError(keyMessages.badTemplate(source, 'it has an unbalanced "<" or ">"'));
  }
}

/**
 * Renders a template with `lookup(placeholder)` for each value; throws `LockKeyError` for a
 * value that is missing, null, empty, an object, or not finite.
 */
export function renderKeyTemplate(
  template: KeyTemplate,
  lookup: (placeholder: Placeholder) => unknown,
): string {
  let key = '';
  for (const part of template.parts) {
    if (typeof part === 'string') key += part;
    else key += encodeKeyPart(template.source, part, lookup(part));
  }
  return key;
}

/** Characters escaped in every value: the escape itself, hash-tag braces, glob characters, controls. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what must be escaped
const ALWAYS_ESCAPED = /[%{}*?[\]\\\u0000-\u001f\u007f]/;
/** `for…of` yields a surrogate alone only when it is unpaired: ill-formed UTF-16. */
const LONE_SURROGATE = /^[\uD800-\uDFFF]$/;

function encodeKeyPart(source: string, placeholder: Placeholder, value: unknown): string {
  const text = formatValue(source, placeholder, value);
  let out = '';
  for (const char of text) {
    const escape =
      char === placeholder.escape || ALWAYS_ESCAPED.test(char) || LONE_SURROGATE.test(char);
    out += escape ? percent(char) : char;
  }
  return out;
}

function percent(char: string): string {
  // A lone surrogate has no UTF-8 form (Buffer writes U+FFFD for each), so give it its own escape.
  if (LONE_SURROGATE.test(char)) {
    return `%u${char.charCodeAt(0).toString(16).toUpperCase()}`;
  }
  return [...Buffer.from(char, 'utf8')]
    .map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`)
    .join('');
}

/**
 * Numbers, bigints and booleans are formatted with `String()`, so `42` and `'42'` lock the same
 * resource (a route param and a parsed id name the same thing).
 */
function formatValue(source: string, placeholder: Placeholder, value: unknown): string {
  const fail = (what: string): never => {
    throw new LockKeyError(messages.badKeyValue(source, placeholder.text, what));
  };
  switch (typeof value) {
    case 'string':
      return value.length > 0 ? value : fail('an empty string');
    case 'number':
      return Number.isFinite(value) ? String(value) : fail(String(value));
    case 'bigint':
    case 'boolean':
      return String(value);
    case 'undefined':
      return fail('undefined (the value is missing)');
    default:
      return fail(
        value === null ? 'null' : `a${typeof value === 'object' ? 'n object' : ` ${typeof value}`}`,
      );
  }
}

/** Follows `path` through own properties only (never `__proto__`, `constructor` of a prototype). */
export function readPath(root: unknown, path: readonly string[]): unknown {
  let value = root;
  for (const segment of path) {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function'))
      return undefined;
    if (!Object.prototype.hasOwnProperty.call(value, segment)) return undefined;
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}
